// Package wire holds the MACP protobuf schemas and the Go code generated from them.
//
// The .proto sources live in wire/proto (proto3; field numbers are the MACP
// wire contract). Generated packages:
//
//   - wire/macp/v1 (macpv1): envelope, core payloads, policy messages and the
//     MACPRuntimeService gRPC stubs
//   - wire/modes/<mode>/v1: payloads of the task, handoff, decision, proposal,
//     quorum and multi_round (multiround) modes
//
// Regenerate with `bash scripts/generate.sh` (or `make generate`); the
// generated code is checked in, so building needs no protoc.
package wire
