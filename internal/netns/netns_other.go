//go:build !linux

package netns

import "errors"

// do runs f in the process's own namespace, the only one there is off
// Linux (the embedded reference runtime's pods share it).
func (ns Namespace) do(f func() error) error {
	if ns.Path == "" {
		return f()
	}
	return errors.New("network namespaces are Linux's")
}
