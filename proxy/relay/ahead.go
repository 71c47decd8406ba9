package relay

// MaxListPages bounds the upstream pages one answer of a list filtered for
// one caller reads (A2A ListTasks, MCP tasks/list): the server's page the
// call asked for, the pages read to fill the caller's page and the pages
// Ahead reads ahead, all included. It is the bound Ahead's more reports;
// one bound for both filtered lists, so that neither reads further for a
// caller than the other.
const MaxListPages = 16

// Ahead is the token a page of a list filtered for one caller ends with,
// when the last item read into the page leaves the server's list at token:
// token when another of the caller's items follows (or whether one does
// cannot be told within the bound), "" when none does, so that no token
// leads only to items the caller does not see (security.md V1, V2: one bit
// about the others, and when it first appears). It is the one read-ahead
// of the filtered lists (A2A ListTasks, MCP tasks/list).
//
// read reads the server's page after at (first: the first page read ahead)
// and reports whether it holds one of the caller's items and the server's
// token after it ("" at the end of the list); more reports whether another
// page may be read (the list's bound on upstream pages a call). The pages
// read ahead are not part of the answer: the next call reads them again.
func Ahead(token string, more func() bool, read func(at string, first bool) (mine bool, next string, err error)) (string, error) {
	for at, first := token, true; at != "" && more(); first = false {
		mine, next, err := read(at, first)
		if err != nil {
			return "", err
		}
		if mine {
			return token, nil
		}
		at = next
		if at == "" {
			return "", nil
		}
	}
	return token, nil
}
