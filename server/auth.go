// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"
)

var anonymous = &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}

// WebhookAuthorizer asks the cluster, with a SubjectAccessReview per
// request (cached for allowTTL or denyTTL), as the kubelet does under
// --authorization-mode=Webhook; RBAC then decides who may reach pods
// through this node (resource nodes, subresource proxy).
func WebhookAuthorizer(client authorizationv1.AuthorizationV1Interface, allowTTL, denyTTL time.Duration) (authorizer.Authorizer, error) {
	a, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client,
		AllowCacheTTL:             allowTTL,
		DenyCacheTTL:              denyTTL,
		// k8s.io/apiserver's default for delegated authorization.
		WebhookRetryBackoff: &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5},
	}.New()
	if err != nil {
		return nil, fmt.Errorf("building the webhook authorizer: %w", err)
	}
	return a, nil
}

// Refusal is a request Authenticate or Authorize refused: the status and the text the kubelet
// answers such a request with.
type Refusal struct {
	Code int
	Msg  string
}

// Authenticate and Authorize decide a request as the kubelet's filter
// does, for kubestream serve's guard and kubestream node's front door
// alike. Authenticate returns the caller (anonymous when authn is nil),
// or the kubelet's 401 when authn does not know it.
func Authenticate(r *http.Request, authn authenticator.Request) (user.Info, *Refusal) {
	if authn == nil {
		return anonymous, nil
	}
	resp, ok, err := authn.AuthenticateRequest(r)
	if err != nil || !ok {
		klog.FromContext(r.Context()).V(2).Info("Unauthenticated request", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
		return anonymous, &Refusal{http.StatusUnauthorized, "Unauthorized"}
	}
	return resp.User, nil
}

// Authorize lets u's request in when any one of attrs is allowed; else it
// returns the kubelet's refusal: 403 when none is (or there are none), 500
// when the authorizer could not decide (its webhook is down), which is no
// denial.
func Authorize(r *http.Request, authz Authorizer, u user.Info, attrs []authorizer.Attributes) *Refusal {
	logger := klog.FromContext(r.Context())
	if len(attrs) == 0 {
		return &Refusal{http.StatusForbidden, "Authorization error: could not determine attributes for request"}
	}
	var subresources []string
	for _, a := range attrs {
		subresources = append(subresources, a.GetSubresource())
		decision, reason, err := authz.Authorize(r.Context(), a)
		switch {
		case decision == authorizer.DecisionAllow:
			return nil
		case err != nil:
			logger.Error(err, "Authorization error", "user", u.GetName(), "verb", a.GetVerb(), "subresource", a.GetSubresource())
			return &Refusal{http.StatusInternalServerError, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)",
				u.GetName(), a.GetVerb(), a.GetResource(), a.GetSubresource())}
		case reason != "":
			logger.V(2).Info("Denied", "user", u.GetName(), "verb", a.GetVerb(), "subresource", a.GetSubresource(), "reason", reason)
		}
	}
	logger.V(2).Info("Forbidden", "user", u.GetName(), "verb", attrs[0].GetVerb(), "path", r.URL.Path, "subresources", subresources)
	return &Refusal{http.StatusForbidden, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=%s, subresource(s)=%v)\n",
		u.GetName(), attrs[0].GetVerb(), attrs[0].GetResource(), subresources)}
}
