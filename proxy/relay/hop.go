package relay

import (
	"errors"
	"io"
	"net/http"
)

// hopHeaders are not forwarded (RFC 9110 §7.6.1).
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
}

// CopyHeaders copies src's end-to-end headers into dst, every value in one
// allocation (each key's slice capped, so that appending to one copies it).
func CopyHeaders(dst, src http.Header) {
	n := 0
	for k, vs := range src {
		if !hopHeaders[k] {
			n += len(vs)
		}
	}
	all := make([]string, 0, n)
	for k, vs := range src {
		if hopHeaders[k] {
			continue
		}
		start := len(all)
		all = append(all, vs...)
		dst[k] = all[start:len(all):len(all)]
	}
}

// ErrBodyTooLarge is an answer over the bound ReadBody was given.
var ErrBodyTooLarge = errors.New("the answer exceeds the size limit")

// ReadBody reads an upstream answer whole, within max bytes (-1: no bound).
func ReadBody(r io.Reader, max int64) ([]byte, error) {
	if max < 0 {
		return io.ReadAll(r)
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err == nil && int64(len(b)) > max {
		return nil, ErrBodyTooLarge
	}
	return b, err
}
