package translator

// Observer sees a remotecommand session's data as the client does, for a
// recording: output once it was written to the client, input as it went to
// the runtime, each terminal size applied. Output runs on the output pump,
// Input and Resize on the client reader; neither may block (a slow
// observer would slow the session) nor keep p after returning.
type Observer interface {
	Output(channel byte, p []byte)
	Input(p []byte)
	Resize(width, height uint16)
}
