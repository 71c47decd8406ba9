module github.com/agentwarden/warden

go 1.26
