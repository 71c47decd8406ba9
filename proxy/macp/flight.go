package macp

import (
	"google.golang.org/grpc/codes"
)

// failedCode reports whether a call that ended with status code c failed
// on Warden's or the runtime's side (the request metrics' outcome "error"),
// not a refusal: the runtime or the keys unavailable, an internal error, no
// room.
func failedCode(c codes.Code) bool {
	switch c {
	case codes.Unavailable, codes.Internal, codes.Unknown, codes.DataLoss, codes.ResourceExhausted, codes.DeadlineExceeded:
		return true
	}
	return false
}
