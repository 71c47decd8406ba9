package audit

// mcpAttacks is the MCP tasks attack set (Streamable HTTP).
func mcpAttacks() []Attack { return nil }
