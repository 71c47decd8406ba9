// Package rules holds what every protocol's pure rules share: the Verdict a
// check returns, its Code, Reason and Rank. The protocols' rules live beside
// it, one package each: rules/macp (the MACP session state machines),
// rules/mcp and rules/a2a, with rules/jsonrpc for the JSON-RPC framing MCP and
// A2A share. Nothing under rules does I/O or reads a clock.
package rules
