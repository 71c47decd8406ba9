package main

import (
	"flag"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy/extauthz"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/macp"
)

// serveFlag is one flag of warden serve: its name, the configuration keys
// it sets (YAML paths, space-separated) and its usage text. The flag's type
// is the keys' type; a flag left off the command line changes nothing.
type serveFlag struct {
	name, keys, usage string
	// zeroCounts: the flag sets its key even to the zero value (a key whose
	// default is not zero); otherwise a zero flag value, as an empty string,
	// 0 or false, leaves the file's value.
	zeroCounts bool
}

// listenerKeys names key in the top-level limits and in every listener's.
func listenerKeys(key string) string {
	return fmt.Sprintf("limits.%[1]s macp.limits.%[1]s mcp.limits.%[1]s a2a.limits.%[1]s extauthz.limits.%[1]s", key)
}

// tlsKeys names key in every listener that serves TLS (--plaintext, --tls-cert, ...).
func tlsKeys(key string) string {
	return fmt.Sprintf("macp.%[1]s mcp.%[1]s a2a.%[1]s", key)
}

// serveFlags is the flag table of warden serve.
var serveFlags = []serveFlag{
	{name: "macp-listen", keys: "macp.listen", usage: "address the MACP sidecar listens on (host:port)"},
	{name: "macp-upstream", keys: "macp.upstream", usage: "address of the MACP runtime (host:port)"},
	{name: "transport", keys: "macp.transport", usage: "the MACP sidecar's front door: relay, the HTTP/2 frame relay, every MACP call decided on it, the only one (grpc, the retired grpc-go door, is built only into the test oracle, -tags wardenoracle) (macp.transport; default relay)"},
	{name: "auth", keys: "authn.mode", usage: "authentication: jwt, static, mtls or dev (comma-separated to try several)"},
	{name: "insecure-dev-auth", keys: "authn.insecure", usage: "allow --auth dev: the bearer value is taken as the identity, unverified"},
	{name: "plaintext", keys: tlsKeys("plaintext") + " macp.upstream_plaintext", usage: "serve and dial the runtime without TLS (loopback and tests only)"},
	{name: "listen-plaintext", keys: tlsKeys("plaintext"), usage: "serve without TLS"},
	{name: "upstream-plaintext", keys: "macp.upstream_plaintext", usage: "dial the runtime without TLS"},
	{name: "tls-cert", keys: tlsKeys("cert_file"), usage: "the listener's certificate (PEM)"},
	{name: "tls-key", keys: tlsKeys("key_file"), usage: "the listener's private key (PEM)"},
	{name: "tls-client-ca", keys: tlsKeys("client_ca_file"), usage: "CA bundle that verifies client certificates (turns on mTLS)"},
	{name: "upstream-ca", keys: "macp.upstream_ca_file", usage: "CA bundle that verifies the runtime's certificate"},
	{name: "max-message-bytes", keys: "macp.max_message_bytes", usage: "largest gRPC message accepted or forwarded (default 4 MiB)"},
	{name: "static-tokens", keys: "authn.static.tokens_file", usage: "static token file in the MACP runtime's shape"},
	{name: "jwks-url", keys: "authn.jwt.jwks_url", usage: "JWKS URL for --auth jwt"},
	{name: "jwks-file", keys: "authn.jwt.jwks_file", usage: "JWKS file for --auth jwt"},
	{name: "jwt-issuer", keys: "authn.jwt.issuer", usage: "required JWT issuer"},
	{name: "jwt-audience", keys: "authn.jwt.audience", usage: "required JWT audience"},
	{name: "sessions", keys: "enforcer.sessions", usage: "session table bound (default 100000)"},
	{name: "sessions-per-principal", keys: "enforcer.sessions_per_principal", usage: "entries one principal may hold in the owner table of MCP and A2A task and context ids; one over it loses its own least recently used, never another's (default sessions / 8, at least 64)"},
	{name: "dry-run", keys: "enforcer.dry_run", usage: "log refusals and forward everything"},
	{name: "pipeline-depth", keys: "enforcer.pipeline_depth", zeroCounts: true, usage: "MACP TaskUpdate, Progress and HandoffContext messages of one session that may await the runtime's answer at once; 0 or 1: one message of a session at a time (default 16)"},
	{name: "macp-max-payload-bytes", keys: "enforcer.macp_max_payload_bytes", zeroCounts: true, usage: "largest MACP envelope payload; a larger one is refused PAYLOAD_TOO_LARGE, as the runtime refuses it: keep it equal to the runtime's MACP_MAX_PAYLOAD_BYTES; 0: no bound (default 1048576)"},
	{name: "macp-message-limit-per-minute", keys: "enforcer.macp_message_limit_per_minute", zeroCounts: true, usage: "ext_authz: MACP messages other than SessionStarts one sender may have let through in a minute; one more is refused RATE_LIMITED, as the runtime refuses it: keep it equal to the runtime's MACP_MESSAGE_LIMIT_PER_MINUTE; 0: no bound (default 600)"},
	{name: "macp-session-start-limit-per-minute", keys: "enforcer.macp_session_start_limit_per_minute", zeroCounts: true, usage: "ext_authz: MACP SessionStarts one sender may have let through in a minute; one more is refused RATE_LIMITED, as the runtime refuses it: keep it equal to the runtime's MACP_SESSION_START_LIMIT_PER_MINUTE; 0: no bound (default 60)"},
	{name: "log-level", keys: "log.level", usage: "debug, info, warn or error"},
	{name: "admin-listen", keys: "admin.listen", usage: "address of the admin port: /healthz, /readyz, /metrics (off when empty)"},
	{name: "admin-pprof", keys: "admin.pprof", usage: "also serve the Go profiler under /debug/pprof/ on the admin port (off by default: whoever reaches the port could profile and trace the process)"},
	{name: "otlp-endpoint", keys: "tracing.otlp_endpoint", usage: "OTLP/gRPC collector (host:port) that receives traces (when empty: OTEL_EXPORTER_OTLP_ENDPOINT, else off)"},
	{name: "extauthz-listen", keys: "extauthz.listen", usage: "serve Envoy ext_authz Check on this address (host:port)"},
	{name: "extauthz-mcp", keys: "extauthz.mcp", usage: "ext_authz: check requests that are not gRPC as MCP Streamable HTTP"},
	{name: "extauthz-max-unconfirmed-starts", keys: "extauthz.max_unconfirmed_starts", usage: fmt.Sprintf("ext_authz: MACP sessions one principal started through this replica that have not ended (terminal or expired); one more SessionStart is refused (default %d)", extauthz.DefaultMaxUnconfirmedStarts)},
	{name: "extauthz-allow-stream-session", keys: "extauthz.allow_stream_session", usage: "ext_authz: let MACP StreamSession through after authentication; Envoy never shows Warden the envelopes sent on it, so no rule on them holds (default: refused, PERMISSION_DENIED)"},
	{name: "extauthz-allow-unfiltered-reads", keys: "extauthz.allow_unfiltered_reads", usage: "ext_authz: let MACP GetSession, ListSessions, WatchSessions and WatchSignals through after authentication, unfiltered: any caller sees every session (default: ListSessions and the watches refused, PERMISSION_DENIED; GetSession decided on the sessions ext_authz keeps)"},
	{name: "extauthz-a2a", keys: "extauthz.a2a", usage: "ext_authz: check requests that are not gRPC as A2A JSON-RPC (not with --extauthz-mcp)"},
	{name: "extauthz-a2a-path", keys: "extauthz.a2a_path", usage: "ext_authz: the A2A JSON-RPC endpoint's path; any other path is denied but GET of the agent card (default /)"},
	{name: "extauthz-mcp-path", keys: "extauthz.mcp_path", usage: "ext_authz: the MCP endpoint's path; any other path is denied (default /mcp)"},
	{name: "extauthz-max-body-bytes", keys: "extauthz.max_body_bytes", usage: "ext_authz: largest MCP or A2A request body; a larger one, or one Envoy cut (x-envoy-auth-partial-body), gets 413 (default 4 MiB; set Envoy's max_request_bytes at least as large)"},
	{name: "mcp-listen", keys: "mcp.listen", usage: "address the MCP sidecar listens on (host:port)"},
	{name: "mcp-upstream", keys: "mcp.upstream", usage: "the MCP server's endpoint URL (http://host:port/mcp)"},
	{name: "decision-log", keys: "decision_log.path", usage: "write one OPA-shaped record per decision to this file (- for standard output; off when empty)"},
	{name: "decision-log-service-url", keys: "decision_log.service.url", usage: "ship the decision records to this HTTP(S) service as OPA's decision log service API takes them: gzip JSON arrays POSTed to URL/logs (off when empty)"},
	{name: "decision-log-service-token-file", keys: "decision_log.service.bearer_token_file", usage: "file holding the bearer token sent to the decision log service (read at each upload)"},
	{name: "decision-log-include-input", keys: "decision_log.include_input", usage: "record in each decision-log record what it was decided on (the MACP envelope, the MCP or A2A policy input), for warden what-if; sensitive: message content (decision_log.include_input)"},
	{name: "upstream-tokens-file", keys: "macp.upstream_tokens_file extauthz.upstream_tokens_file", usage: "token file (the runtime's shape) whose token for a principal authenticated by client certificate is presented to the runtime in place of the client's credentials (MACP sidecar and ext_authz)"},
	{name: "mcp-max-body-bytes", keys: "mcp.max_body_bytes", usage: "MCP: largest request body; a larger one gets 413 and a JSON-RPC error naming the limit (default 4 MiB)"},
	{name: "mcp-max-response-bytes", keys: "mcp.max_response_bytes", usage: "MCP: largest answer body or SSE event Warden reads whole to check it; a larger answer becomes a JSON-RPC error naming the limit, -1 for no bound (default 64 MiB)"},
	{name: "mcp-handle-key-file", keys: "mcp.handle_key_file", usage: "key (>= 32 bytes) binding MCP task and session handles to principals; replicas share it (random per start when empty)"},
	{name: "a2a-listen", keys: "a2a.listen", usage: "address the A2A sidecar listens on (host:port)"},
	{name: "a2a-upstream", keys: "a2a.upstream", usage: "the A2A server's JSON-RPC endpoint URL (http://host:port/path)"},
	{name: "a2a-handle-key-file", keys: "a2a.handle_key_file", usage: "key (>= 32 bytes) binding A2A task, context and page-token handles to principals; replicas share it (random per start when empty)"},
	{name: "a2a-max-body-bytes", keys: "a2a.max_body_bytes", usage: "A2A: largest request body; a larger one gets 413 and a JSON-RPC error naming the limit (default 4 MiB)"},
	{name: "a2a-max-response-bytes", keys: "a2a.max_response_bytes", usage: "A2A: largest answer body or SSE event Warden reads whole to check it; a larger answer becomes a JSON-RPC error naming the limit, -1 for no bound (default 64 MiB)"},
	{name: "a2a-webhook-allow", keys: "a2a.webhook_allow extauthz.a2a_webhook_allow", usage: "A2A: a network (CIDR), address, host or host:port push-notification URLs may name although internal (repeatable)"},
	{name: "a2a-webhook-allow-only", keys: "a2a.webhook_allow_only extauthz.a2a_webhook_allow_only", usage: "A2A (sidecar and ext_authz): push notifications go only to what --a2a-webhook-allow names"},
	{name: "a2a-push-relay-listen", keys: "a2a.push_relay.listen", usage: "A2A: address the push relay serves the A2A server on, plain HTTP; a fixed port lets push configs outlive a restart (default 127.0.0.1:0)"},
	{name: "a2a-push-relay-url", keys: "a2a.push_relay.url", usage: "A2A: the push relay's base URL as the A2A server reaches it (default http:// and the relay's listen address)"},
	{name: "a2a-push-timeout", keys: "a2a.push_relay.timeout", usage: "A2A: time one push delivery may take, dial to answer (default 10s)"},
	{name: "a2a-push-max-age", keys: "a2a.push_relay.max_age", usage: "A2A: how long a push config set through the relay is delivered to, from when it was set; then the relay answers the server 410 Gone, -1s for no bound (default 24h)"},
	{name: "state", keys: "state.url", usage: "share the MCP and A2A task tables, and with --extauthz-listen the MACP sessions, between replicas through Redis: redis://host:port/db (state.url; off when empty)"},
	{name: "max-streams", keys: "macp.streams.max", usage: fmt.Sprintf("MACP: relayed calls held open at once (StreamSession, the watches, pass-through), all callers together; at most %d, the rest of the runtime's streams stay for decided calls (default %d)", macp.MaxStreamsLimit, macp.DefaultMaxStreams)},
	{name: "max-streams-per-principal", keys: "macp.streams.per_principal", usage: fmt.Sprintf("MACP: relayed calls one principal holds open at once (default %d)", macp.DefaultStreamsPerPrincipal)},
	{name: "max-queued-bytes", keys: "macp.streams.queued_bytes", usage: fmt.Sprintf("MACP: bytes of messages waiting for the clients of all relayed calls together; a call holding more than 64 KiB when it is taken up is ended (default %d)", macp.DefaultQueuedBytes)},
	{name: "max-anonymous-streams", keys: "macp.streams.anonymous", usage: fmt.Sprintf("MACP: relayed calls without credentials (pass-through services such as gRPC health, public discovery) open at once (default %d)", macp.DefaultAnonymousStreams)},
	{name: "max-watches", keys: "macp.streams.watches", usage: fmt.Sprintf("MACP: how many of --max-streams the watches (WatchSignals, WatchSessions) may hold, all callers together; the rest stays for StreamSession and the other relayed calls (default min(%d, max-streams / 3))", macp.DefaultWatches)},
	{name: "max-watches-per-principal", keys: "macp.streams.watches_per_principal", usage: fmt.Sprintf("MACP: watches one principal holds open at once (default %d)", macp.DefaultWatchesPerPrincipal)},
	{name: "watch-idle", keys: "macp.streams.watch_idle", usage: fmt.Sprintf("MACP: end a watch that passed its client nothing for this long, UNAVAILABLE (default %v)", macp.DefaultWatchIdle)},
	{name: "sidecar-max-streams", keys: "mcp.streams.max a2a.streams.max", usage: "MCP and A2A: requests forwarded and held open at once (answers, SSE streams), all callers together; also caps the upstream connections (mcp.streams.max, a2a.streams.max; default: the listener's connection cap)"},
	{name: "sidecar-max-streams-per-principal", keys: "mcp.streams.per_principal a2a.streams.per_principal", usage: fmt.Sprintf("MCP and A2A: requests one principal holds open at once; one more gets 429 with Retry-After and a JSON-RPC error (mcp.streams.per_principal, a2a.streams.per_principal; default %d)", listener.DefaultStreamsPerPrincipal)},
	{name: "sidecar-max-watches", keys: "mcp.streams.watches a2a.streams.watches", usage: "MCP and A2A: how many of --sidecar-max-streams the standing streams (MCP's GET stream, A2A's SubscribeToTask) may hold, all callers together; the rest stays for decided requests (default a third of it)"},
	{name: "sidecar-max-watches-per-principal", keys: "mcp.streams.watches_per_principal a2a.streams.watches_per_principal", usage: "MCP and A2A: how many of its --sidecar-max-streams-per-principal one principal's standing streams may hold (default half of it)"},
	{name: "sidecar-watch-idle", keys: "mcp.streams.watch_idle a2a.streams.watch_idle", usage: fmt.Sprintf("MCP and A2A: end a standing stream that passed its client no event for this long (default %v)", listener.DefaultWatchIdle)},
	{name: "sidecar-answer-bytes", keys: "mcp.streams.answer_bytes a2a.streams.answer_bytes", usage: fmt.Sprintf("MCP and A2A: bytes of answers read whole to check them that the requests in flight hold together; one answer alone always fits, one more past the budget gets 503 with Retry-After and a JSON-RPC error (mcp.streams.answer_bytes, a2a.streams.answer_bytes; default %d)", listener.DefaultAnswerBytes)},
	{name: "max-connections", keys: listenerKeys("max_connections"), usage: "connections each listener holds open at once; more are closed at accept (default min(4096, (file limit - 256) / 4))"},
	{name: "max-connections-per-source", keys: listenerKeys("max_connections_per_source"), usage: "connections one source address (an IPv6 address by its /64) holds open on each listener; more are closed at accept (default a quarter of --max-connections, at least 32)"},
	{name: "max-unauthenticated", keys: listenerKeys("max_unauthenticated"), usage: "connections on which no request has yet presented a valid credential, on each listener; when full, a newcomer replaces the largest such holder's oldest, never an authenticated connection (default a quarter of --max-connections, at least 8)"},
	{name: "max-unauthenticated-per-source", keys: listenerKeys("max_unauthenticated_per_source"), usage: fmt.Sprintf("unauthenticated connections one source address holds on each listener (default %d)", listener.DefaultMaxUnauthenticatedPerSource)},
	{name: "auth-timeout", keys: listenerKeys("auth_timeout"), usage: "close a connection on which no request presented a valid credential within this long of its accept (default 10s)"},
	{name: "header-timeout", keys: listenerKeys("header_timeout"), usage: "HTTP: time for TLS handshake, request line and headers (default 10s)"},
	{name: "body-timeout", keys: listenerKeys("body_timeout"), usage: "HTTP: time to read a whole request, body included; gRPC: to receive a call's request message; responses are not bounded (default 60s)"},
	{name: "idle-timeout", keys: listenerKeys("idle_timeout"), usage: "close an HTTP keep-alive connection without a request, or a gRPC connection without a call, after this long (default 75s)"},
	{name: "grpc-connection-timeout", keys: listenerKeys("grpc_connection_timeout"), usage: "gRPC: time for TLS handshake and HTTP/2 preface of a new connection (default 10s)"},
	{name: "grpc-keepalive-time", keys: listenerKeys("grpc_keepalive_time"), usage: "gRPC: ping a connection silent this long (default 60s)"},
	{name: "grpc-keepalive-timeout", keys: listenerKeys("grpc_keepalive_timeout"), usage: "gRPC: close a connection whose ping is unanswered this long (default 20s)"},
	{name: "grpc-keepalive-min-time", keys: listenerKeys("grpc_keepalive_min_time"), usage: "gRPC: shortest interval at which clients may ping (default 10s)"},
	{name: "upstream-backoff-max", keys: listenerKeys("upstream_backoff_max"), usage: "longest delay between reconnects to the MACP runtime (default 1s)"},
	{name: "upstream-connect-timeout", keys: listenerKeys("upstream_connect_timeout"), usage: "time one connection attempt to an upstream may take (default 2s)"},
	{name: "tls-reload-interval", keys: listenerKeys("tls_reload_interval"), usage: "how often the listeners' certificate, key and client CA files are read again; a change applies to new handshakes and closes connections whose client certificate no longer verifies (default 10s; SIGHUP reloads at once)"},
	{name: "policy", keys: "policies.files", usage: "an extra Rego policy file (repeatable)"},
	{name: "gc-min-heap-bytes", keys: "gc.min_heap_bytes", usage: "floor under the garbage collector's heap goal: no collection before the heap reaches it; -1 for none (default 64 MiB)"},
	{name: "gc-percent", keys: "gc.percent", usage: "GOGC above the floor; -1 for off but for the memory limit (default: GOGC's, 100)"},
	{name: "gc-memory-limit-bytes", keys: "gc.memory_limit_bytes", usage: "the runtime's soft memory limit, GOMEMLIMIT (default: GOMEMLIMIT's, none)"},
}

// serveOverlay holds the values of the serve flags after parsing; apply
// puts the flags the command line set over a configuration read from the
// file (a reload reads the file again and applies the same flags).
type serveOverlay struct {
	vals map[string]reflect.Value // flag name -> its parsed value
	set  []serveFlag              // the flags the command line set, in table order
}

// registerServeFlags defines every flag of the table on fs, typed as the
// keys it sets: string, bool, int, int64, duration; a list of strings is
// repeatable; authn.mode takes a comma-separated list.
func registerServeFlags(fs *flag.FlagSet) *serveOverlay {
	o := &serveOverlay{vals: map[string]reflect.Value{}}
	var probe Config
	for _, f := range serveFlags {
		typ := configKey(&probe, strings.Fields(f.keys)[0]).Type()
		v := reflect.New(typ)
		switch p := v.Interface().(type) {
		case *int:
			if f.zeroCounts {
				fs.Func(f.name, f.usage, func(s string) error {
					n, err := strconv.Atoi(s)
					*p = n
					return err
				})
			} else {
				fs.IntVar(p, f.name, 0, f.usage)
			}
		case *string:
			fs.StringVar(p, f.name, "", f.usage)
		case *bool:
			fs.BoolVar(p, f.name, false, f.usage)
		case *int64:
			fs.Int64Var(p, f.name, 0, f.usage)
		case *time.Duration:
			fs.DurationVar(p, f.name, 0, f.usage)
		case *[]string:
			fs.Var((*multi)(p), f.name, f.usage)
		case *authn.Audience, *authn.Methods:
			v = reflect.New(reflect.TypeOf(""))
			fs.StringVar(v.Interface().(*string), f.name, "", f.usage)
		default:
			panic(fmt.Sprintf("serve flag --%s: keys of type %v", f.name, typ))
		}
		o.vals[f.name] = v.Elem()
	}
	return o
}

// parsed records which flags the command line set; call it after fs.Parse.
func (o *serveOverlay) parsed(fs *flag.FlagSet) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, f := range serveFlags {
		if given[f.name] {
			o.set = append(o.set, f)
		}
	}
}

// apply puts the flags the command line set over c: a flag replaces each
// key it names (a bool turns it on, a repeatable flag appends), then every
// listener inherits the top-level limits where its own leave a key unset.
func (o *serveOverlay) apply(c *Config) {
	for _, f := range o.set {
		v := o.vals[f.name]
		if v.IsZero() && !f.zeroCounts {
			continue
		}
		for _, key := range strings.Fields(f.keys) {
			dst := configKey(c, key)
			switch dst.Interface().(type) {
			case []string:
				dst.Set(reflect.AppendSlice(dst, v))
			case authn.Audience:
				dst.Set(reflect.ValueOf(authn.Audience{v.String()}))
			case authn.Methods:
				var m authn.Methods
				for _, s := range strings.Split(v.String(), ",") {
					m = append(m, authn.Method(strings.TrimSpace(s)))
				}
				dst.Set(reflect.ValueOf(m))
			default:
				dst.Set(v)
			}
		}
	}
	c.inheritLimits(listener.Limits{})
}

// configKey is the field of c that the YAML path key (a.b.c) names; it
// panics on a key that names none: the flag table is wrong.
func configKey(c *Config, key string) reflect.Value {
	v := reflect.ValueOf(c).Elem()
	for _, name := range strings.Split(key, ".") {
		f, ok := fieldByYAML(v, name)
		if !ok {
			panic(fmt.Sprintf("serve flags: no configuration key %q", key))
		}
		v = f
	}
	return v
}

// fieldByYAML is the field of struct v whose YAML key is name, looking
// through inlined structs.
func fieldByYAML(v reflect.Value, name string) (reflect.Value, bool) {
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		if strings.Contains(tag, ",inline") || (sf.Anonymous && tag == "") {
			if f, ok := fieldByYAML(v.Field(i), name); ok {
				return f, true
			}
			continue
		}
		if yamlName(sf) == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// yamlName is the YAML key of a configuration struct's field.
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		return strings.ToLower(f.Name)
	}
	return name
}
