package audit

// macpAttacks is the MACP attack set (gRPC, the runtime's host:port given as http://host:port).
func macpAttacks() []Attack { return nil }
