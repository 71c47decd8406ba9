package authn

import "context"

type proofKey struct{}

// WithProof returns ctx carrying prove, which Proven calls: the listener
// puts there what marks the client connection a request came on as having
// presented a valid credential.
func WithProof(ctx context.Context, prove func()) context.Context {
	return context.WithValue(ctx, proofKey{}, prove)
}

// Proven records that the request ctx belongs to presented a valid
// credential (or, in dry run, one whose refusal is only logged): it calls
// the proof WithProof put in ctx, if any.
func Proven(ctx context.Context) {
	if prove, _ := ctx.Value(proofKey{}).(func()); prove != nil {
		prove()
	}
}
