"""A Python SDK (mcp 2.3.0) MCPServer whose tools take typed arguments, for
Warden's test of arguments the tool reads as another JSON type than the
one sent (TestMCPArgumentTypes): the SDK parses a string argument holding
JSON into the list or object its parameter declares (pre_parse_json) and
pydantic's lax mode turns "false", 0 or "no" into a bool.

usage: typed_server.py HOST:PORT
"""
import sys
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, Json, StringConstraints
from pydantic.alias_generators import to_camel

from mcp.server.mcpserver import MCPServer

app = MCPServer("typed")


@app.tool()
def read_files(paths: list[str]) -> str:
    """Reads the files named (here: says which it would read)."""
    return "read " + ",".join(paths)


@app.tool()
def remove(path: str, dry_run: bool = True) -> str:
    """Removes a file unless dry_run."""
    return ("would remove " if dry_run else "removed ") + path


class Rm(BaseModel):
    kind: Literal["rm"]
    path: str
    dry_run: bool = True


class Ls(BaseModel):
    kind: Literal["ls"]
    path: str
    dry_run: str = "n/a"


@app.tool()
def act(action: Annotated[Rm | Ls, Field(discriminator="kind")]) -> str:
    """A tagged union (S1): the tag picks the model, pydantic reads its dry_run laxly."""
    if isinstance(action, Rm):
        return ("would remove " if action.dry_run else "removed ") + action.path
    return "listed " + action.path


@app.tool()
def flags(path: str, f: dict[Annotated[str, StringConstraints(pattern=r"^x_")], bool]) -> str:
    """A dict keyed by pattern (S1: patternProperties)."""
    return ("would remove " if f.get("x_dry_run", True) else "removed ") + path


class ByPath(BaseModel):
    dry_run: bool
    path: str


class ByName(BaseModel):
    dry_run: str
    name: str


@app.tool()
def either(a: ByPath | ByName) -> str:
    """A plain union of two models (S1): pydantic picks one laxly when neither validates strictly."""
    if isinstance(a, ByPath):
        return ("would remove " if a.dry_run else "removed ") + a.path
    return "named " + a.name


@app.tool()
def read_some(paths: str | list[str]) -> str:
    """A union with str (S1): a string of JSON is parsed (pre_parse_json) since the annotation is not str."""
    return "read " + (paths if isinstance(paths, str) else ",".join(paths))


@app.tool()
def read_any(paths, where="here") -> str:
    """No annotation (S1): listed as a string (with its default, if any), read as Any after pre_parse_json."""
    return "read " + (paths if isinstance(paths, str) else ",".join(paths)) + ("" if where == "here" else " in " + repr(where))


class Cleanup(BaseModel):
    # the SDK's own models' style: camelCase on the wire, Python names read too
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)
    path: str
    dry_run: bool = True


@app.tool()
def tidy(o: Cleanup) -> str:
    """A model with populate_by_name (T1): listed as dryRun, read as dry_run too."""
    return ("would remove " if o.dry_run else "removed ") + o.path


class Batch(BaseModel):
    paths: Json[list[str]]


@app.tool()
def read_batch(b: Batch) -> str:
    """A string holding JSON by its schema (T2: Json[T], contentMediaType): pydantic parses it."""
    return "read " + ",".join(b.paths)


class Spec(BaseModel):
    spec: Json[dict[str, str]]


@app.tool()
def read_spec(o: Spec) -> str:
    """A string holding a JSON object (T2): pydantic's parser (jiter) takes the last of a name given twice."""
    return "read " + o.spec.get("path", "")


host, port = sys.argv[1].rsplit(":", 1)
app.run(transport="streamable-http", host=host, port=int(port))
