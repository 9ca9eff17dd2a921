// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
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
