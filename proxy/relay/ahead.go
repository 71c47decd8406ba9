package relay

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
