"""YAML in, with line numbers kept: the first step of every spec.

``load_yaml`` reads with PyYAML's *safe* loader only, and returns plain dicts
and lists (``LocDict``/``LocList``) that remember where each key and item was
written, so a later validation error can say ``study.yaml:12:5 hbm.stacks``.
Duplicate keys, which PyYAML silently overwrites, are errors here.

Limits (issue 21, hostile files): a file larger than :data:`MAX_BYTES` is
refused before it is read, and so is anything that is not a regular file
(a FIFO, ``/dev/zero``); a document whose aliases expand to more than
:data:`MAX_NODES` nodes (a "billion laughs" bomb) is refused after parsing
and before anything walks it, in well under a second and a few MB.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from dse.errors import SpecError
from dse.fileio import INPUT_MAX_BYTES, read_input_text

Loc = tuple[int, int]  # 1-based line, column

#: The largest YAML file dse reads (chip, study, what-if and workload files are a few kB).
MAX_BYTES = INPUT_MAX_BYTES
#: The most nodes a document may hold once its aliases are expanded.
MAX_NODES = 200_000


class LocDict(dict):
    """A dict that remembers where it and each of its keys and values were written."""

    file: str = "<string>"
    loc: Loc = (1, 1)

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.key_locs: dict = {}
        self.value_locs: dict = {}


class LocList(list):
    file: str = "<string>"
    loc: Loc = (1, 1)

    def __init__(self, *args):
        super().__init__(*args)
        self.item_locs: list[Loc] = []


def _mark(node) -> Loc:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


class _Loader(yaml.SafeLoader):
    """Safe loader that builds LocDict/LocList and rejects duplicate keys."""

    def __init__(self, stream, file: str):
        super().__init__(stream)
        self.file = file


def _construct_mapping(loader: _Loader, node: yaml.MappingNode):
    loader.flatten_mapping(node)
    out = LocDict()
    out.file, out.loc = loader.file, _mark(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            line, col = _mark(key_node)
            raise SpecError(f"{loader.file}:{line}:{col}: a mapping key must be a scalar, got {type(key).__name__}")
        if key in out:
            line, col = _mark(key_node)
            first = out.key_locs[key][0]
            raise SpecError(f"{loader.file}:{line}:{col} {key}: duplicate key (first written at line {first})")
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_locs[key] = _mark(key_node)
        out.value_locs[key] = _mark(value_node)
    return out


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode):
    out = LocList(loader.construct_object(child, deep=True) for child in node.value)
    out.file, out.loc = loader.file, _mark(node)
    out.item_locs = [_mark(child) for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def _expanded_size(node, limit: int) -> int:
    """Nodes of ``node`` with every alias expanded (memoized per node, so a bomb is sized without expanding it)."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()  # nodes being sized: meeting one again below itself is a recursive alias
    stack = [(node, False)]
    while stack:
        n, done = stack.pop()
        if id(n) in sizes:
            continue
        if not done:
            if id(n) in visiting:
                line, col = _mark(n)
                raise SpecError(f"{line}:{col}: a recursive alias (an anchor used inside itself); "
                                f"dse files hold plain trees of values")
            visiting.add(id(n))
        kids = []
        if isinstance(n, yaml.MappingNode):
            kids = [x for pair in n.value for x in pair]
        elif isinstance(n, yaml.SequenceNode):
            kids = list(n.value)
        if done or not kids:
            sizes[id(n)] = min(1 + sum(sizes.get(id(k), 0) for k in kids), limit + 1)
            visiting.discard(id(n))
            continue
        stack.append((n, True))
        stack.extend((k, False) for k in kids if id(k) not in sizes)
    return sizes[id(node)]


def load_yaml_text(text: str, file: str = "<string>"):
    """Parse YAML text; errors name the file, line and column."""
    if len(text) > MAX_BYTES:
        raise SpecError(f"{file}: {len(text):,} characters of YAML; dse reads files up to {MAX_BYTES:,} "
                        f"(chip, study and what-if files are a few kB)")
    try:
        loader = _Loader(text, file)
        try:
            node = loader.get_single_node()
            try:
                too_big = node is not None and _expanded_size(node, MAX_NODES) > MAX_NODES
            except SpecError as e:
                raise SpecError(f"{file}:{e}") from None
            if too_big:
                line, col = _mark(node)
                raise SpecError(f"{file}:{line}:{col}: the document expands to more than {MAX_NODES:,} values "
                                f"through its aliases (&anchor / *alias); write the values out or use fewer aliases")
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except SpecError:
        raise
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else file
        what = " ".join(x for x in (e.context, e.problem) if x)
        raise SpecError(f"{where}: malformed YAML: {what}") from None
    except yaml.reader.ReaderError as e:  # a character YAML does not allow (NUL, a control code): at its place
        pos = max(int(e.position), 0)
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        what = f"unacceptable character #x{e.character:04x}" if isinstance(e.character, int) else str(e.reason)
        raise SpecError(f"{file}:{line}:{col}: malformed YAML: {what}: {e.reason}") from None
    except yaml.YAMLError as e:
        raise SpecError(f"{file}: malformed YAML: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    except RecursionError:
        raise SpecError(f"{file}: YAML nested too deeply") from None
    if data is None:
        raise SpecError(f"{file}:1:1: the file is empty; expected a YAML mapping")
    if not isinstance(data, (LocDict, LocList)):  # a bare scalar cannot carry its file: say it here
        raise SpecError(f"{file}:1:1: expected a YAML mapping, got a single {type(data).__name__} ({str(data)[:40]!r})")
    return data


def load_yaml(path) -> object:
    """Read and parse a YAML file (UTF-8). Errors name the file."""
    path = Path(path)
    text = read_input_text(path, "a YAML file", "YAML files", max_bytes=MAX_BYTES)
    return load_yaml_text(text, str(path))


def locate(root, path) -> tuple[str, Loc]:
    """File and (line, col) of the deepest part of ``path`` that exists in ``root``."""
    file = getattr(root, "file", "<input>")
    loc = getattr(root, "loc", (1, 1))
    node = root
    for part in path:
        if isinstance(node, LocDict) and part in node:
            loc = node.value_locs.get(part, loc)
            node = node[part]
        elif isinstance(node, LocList) and isinstance(part, int) and 0 <= part < len(node):
            loc = node.item_locs[part]
            node = node[part]
        else:
            break
        file = getattr(node, "file", file)
    return file, loc


def key_loc(root, path) -> tuple[str, Loc]:
    """Location of the *key* at the end of ``path`` (for unknown or duplicate keys)."""
    if not path:
        return locate(root, path)
    file, loc = locate(root, path[:-1])
    parent = root
    for part in path[:-1]:
        try:
            parent = parent[part]
        except (KeyError, IndexError, TypeError):
            return file, loc
    if isinstance(parent, LocDict) and path[-1] in parent.key_locs:
        return getattr(parent, "file", file), parent.key_locs[path[-1]]
    return file, loc
