package macp

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy/handle"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// ListSessions is paged by Warden over the caller's sessions only. The
// runtime pages over every session and its next_page_token names the last
// session of its page (base64url of "v1:<session id>" in the reference
// runtime): forwarded through a filtered answer, it showed other principals'
// session ids, and the empty pages between the caller's sessions counted
// them. Warden reads the runtime's pages itself and answers with pages of
// the caller's sessions and a token of its own: the runtime's cursor sealed
// to the caller (proxy/handle), which shows nothing and opens for nobody
// else. A page is full, or the last one: its token is empty exactly when no
// more of the caller's sessions follow.
const (
	listDefaultPage = 100  // the runtime's default page_size
	listMaxPage     = 1000 // the runtime's cap on page_size, and the size Warden reads
	// listScanPages bounds the runtime pages one call reads (16,000
	// sessions): past it, the page so far is answered with a token to go on.
	listScanPages = 16
)

// kindListCursor is the handle kind of Warden's ListSessions tokens.
const kindListCursor byte = 'l'

// newPageSealer returns the sealer of ListSessions tokens, with a key of its
// own: a token lives as long as the process, as the runtime's are "short-lived
// and implementation-defined".
func newPageSealer() (handle.Sealer, error) {
	keys, err := handle.LoadKeyring("")
	if err != nil {
		return handle.Sealer{}, err
	}
	return handle.NewSealer(handle.NewRing(keys), "macp", []byte{kindListCursor})
}

// listCursor is where a caller's listing stands: the runtime's token of the
// page being read ("" for the first) and the last session of it already
// read (sessions come in ascending id order, as the runtime's keyset scan
// gives them).
type listCursor struct {
	upstream string
	after    string
}

func (s *Server) sealCursor(principal string, c listCursor) string {
	return s.pages.Seal(kindListCursor, principal, c.upstream+"\x00"+c.after)
}

func (s *Server) openCursor(principal, token string) (listCursor, bool) {
	plain, ok := s.pages.Open(kindListCursor, principal, token)
	if !ok {
		return listCursor{}, false
	}
	up, after, ok := strings.Cut(plain, "\x00")
	return listCursor{upstream: up, after: after}, ok
}

// errBadPageToken is the runtime's own answer to a token it did not issue.
var errBadPageToken = status.Error(codes.InvalidArgument, "INVALID_ARGUMENT: page_token is not a valid continuation token")

// listOwn answers a ListSessions made as p (msg its request message) with
// a page of p's own sessions; ctx carries p's credentials for the runtime.
func (s *Server) listOwn(ctx context.Context, p authn.Principal, msg []byte) (*macpv1.ListSessionsResponse, error) {
	var in macpv1.ListSessionsRequest
	if err := proto.Unmarshal(msg, &in); err != nil {
		return nil, status.Error(codes.InvalidArgument, "INVALID_ARGUMENT: the ListSessionsRequest does not decode")
	}
	want := int(in.GetPageSize())
	switch {
	case want < 0:
		return nil, status.Error(codes.InvalidArgument, "INVALID_ARGUMENT: page_size must not be negative")
	case want == 0:
		want = listDefaultPage
	case want > listMaxPage:
		want = listMaxPage
	}
	cur := listCursor{}
	if in.GetPageToken() != "" {
		var ok bool
		if cur, ok = s.openCursor(p.ID, in.GetPageToken()); !ok {
			return nil, errBadPageToken
		}
	}
	var out macpv1.ListSessionsResponse
	for range listScanPages {
		page, err := s.listPage(ctx, cur.upstream)
		if err != nil {
			return nil, err
		}
		read := cur
		for _, m := range page.GetSessions() {
			id := m.GetSessionId()
			if cur.after != "" && id <= cur.after {
				continue // read by an earlier call
			}
			if !member(m, p.ID) {
				read.after = id
				continue
			}
			if len(out.Sessions) == want { // one more of the caller's follows
				out.NextPageToken = s.sealCursor(p.ID, read)
				return &out, nil
			}
			out.Sessions = append(out.Sessions, m)
			read.after = id
		}
		if page.GetNextPageToken() == "" {
			return &out, nil
		}
		cur = listCursor{upstream: page.GetNextPageToken()}
	}
	out.NextPageToken = s.sealCursor(p.ID, cur)
	return &out, nil
}

// listPage reads one page of the runtime's listing with the caller's
// credentials (in ctx).
func (s *Server) listPage(ctx context.Context, token string) (*macpv1.ListSessionsResponse, error) {
	b, err := proto.Marshal(&macpv1.ListSessionsRequest{PageSize: listMaxPage, PageToken: token})
	if err != nil {
		return nil, fmt.Errorf("encode ListSessionsRequest: %w", err)
	}
	resp := &frame{}
	if err := s.up.Invoke(ctx, service+"ListSessions", &frame{b: b}, resp); err != nil {
		return nil, s.upstreamError(err)
	}
	var page macpv1.ListSessionsResponse
	if err := proto.Unmarshal(resp.b, &page); err != nil {
		return nil, status.Error(codes.Internal, "the runtime's ListSessionsResponse does not decode")
	}
	return &page, nil
}
