"""A Python SDK (mcp 2.3.0) MCPServer whose tools take typed arguments, for
Warden's test of arguments the tool reads as another JSON type than the
one sent (TestMCPArgumentTypes): the SDK parses a string argument holding
JSON into the list or object its parameter declares (pre_parse_json) and
pydantic's lax mode turns "false", 0 or "no" into a bool, and "5000" into
an int, under a name a pattern declares (patternProperties); a string of JSON
is parsed for a parameter not declared as a plain str (list[str] | str).

usage: typed_server.py HOST:PORT
"""
import sys
from typing import Annotated

from pydantic import StringConstraints

from mcp.server.mcpserver import MCPServer

app = MCPServer("typed")


@app.tool()
def read_files(paths: list[str]) -> str:
    """Reads the files named (here: says which it would read)."""
    return "read " + ",".join(paths)


@app.tool()
def read_either(paths: list[str] | str) -> str:
    """Reads the files named, one or several (here: says which it would read)."""
    return "read " + (",".join(paths) if isinstance(paths, list) else paths)


@app.tool()
def read_untyped(paths) -> str:  # no annotation: the SDK lists it as a string, pydantic takes Any
    """Reads the files named (here: says which it would read)."""
    return "read " + (",".join(paths) if isinstance(paths, list) else paths)


@app.tool()
def remove(path: str, dry_run: bool = True) -> str:
    """Removes a file unless dry_run."""
    return ("would remove " if dry_run else "removed ") + path


@app.tool()
def pay(limits: dict[Annotated[str, StringConstraints(pattern=r"^n_(\d+|x)$")], int]) -> str:
    """Pays each account named its amount (here: says what it would pay)."""
    return "paid " + ",".join(f"{k}={v}" for k, v in limits.items())


host, port = sys.argv[1].rsplit(":", 1)
app.run(transport="streamable-http", host=host, port=int(port))
