"""The seal: what code under test may no longer do once the grader's machinery is loaded.

``launch.py`` loads pytest, its plugins and the reporter, then calls ``install`` before the
repository enters ``sys.path``: from then on nothing of the patch has run, and nothing it runs
can undo what is set here.

- **An audit hook (PEP 578)**, which cannot be removed, turns the general tools of in-process
  forgery into a ``tamper`` record and refuses them: tracing and profiling (``sys.settrace``,
  ``sys.setprofile``, ``sys.monitoring``), a graded test's or pytest's code swapped
  (``__code__``), other threads' frames, the garbage collector's object lists, raw memory and
  the interpreter's C API through ``ctypes``, ``/proc/*/mem`` by name (every other path to the
  process's memory the kernel refuses: ``lockdown.py``), and a second audit hook. No fix
  needs any of them while its tests run; a project whose own tests do is not gradable
  (validate's ``gold_runs`` says so).
- **The machinery's integrity**, checked before each graded test runs and at each of its
  reports: the functions and classes of pytest and pluggy are the ones they were when
  ``pytest_load_initial_conftests`` began, the plugins imported (hypothesis's patches pytest as
  it loads), but for pytest's own patches made inside it (``legacypath``'s, each identified by
  the function object ``_pytest.legacypath`` held then). Fixed as that hook begins, not where
  the reporter's own implementation runs: a plugin's implementation may run the repository's
  code before any conftest (pytest-django's imports the settings module, ``django.setup()`` the
  apps), and a rebinding it made became the fixed state (graded resolved without a fix);
  the plugins and hook implementations are those registered when collection ended, no instance
  attribute of a test item stands in for its class's method, and the test function runs the
  code its own file compiles to (plain or with pytest's assertion rewriting): a module loaded
  through another finder, with its asserts turned into ``pass``, is told apart.

What it does not close is said in docs/security.md: in-process code that walks frames to
pytest's objects (frames are everyday Python: logging walks them) and rebinds what it finds.

Standard library and pytest only; Python 3.9 and up. Loaded by path into a namespace of its own,
never into ``sys.modules``.
"""

import ast
import os
import re
import sys
from operator import is_

# Everything the hook and the checks call from a module is bound here, as the seal loads,
# before any code of the repository runs: looked up when they run, in ``sys``, ``os`` or ``ast``,
# it is whatever a test rebound it to. (A ``sys._getframe`` that answered "doctest's runner,
# restoring no tracer" let a tracer in, and the tracer passed the graded test's reports: forge
# kit route ``faked_doctest_frame``.) Builtins are the same: ``launch.py`` loads this file with a
# copy of them taken then, so a test that rebinds ``builtins.getattr`` changes nothing here.
_getframe = sys._getframe
_normpath, _isfile = os.path.normpath, os.path.isfile
_parse, _children = ast.parse, ast.iter_child_nodes
_FUNCTIONS, _CLASS = (ast.FunctionDef, ast.AsyncFunctionDef), ast.ClassDef
# launch.py imports every module of _pytest before it loads the seal: the rewriter is pytest's
_REWRITE = getattr(sys.modules.get("_pytest.assertion.rewrite"), "rewrite_asserts", None)
_CLASS_NODE = getattr(sys.modules.get("_pytest.python"), "Class", None)  # a collected class

# Audit events no graded run needs, and why each is refused.
REFUSED = {
    "sys.settrace": "tracing (sys.settrace)",
    "sys.setprofile": "profiling (sys.setprofile)",
    "sys._current_frames": "other threads' frames (sys._current_frames)",
    "sys.addaudithook": "a second audit hook",
    "gc.get_objects": "the garbage collector's object list (gc.get_objects)",
    "gc.get_referrers": "the garbage collector's referrers (gc.get_referrers)",
    "gc.get_referents": "the garbage collector's referents (gc.get_referents)",
    "ctypes.PyObj_FromPtr": "an object from a raw address (ctypes)",
    "ctypes.cdata": "memory at a raw address (ctypes)",
    "sys.monitoring.register_callback": "execution monitoring (sys.monitoring)",
    "sys.monitoring.set_events": "execution monitoring (sys.monitoring)",
    "sys.monitoring.set_local_events": "execution monitoring (sys.monitoring)",
}
FUNCTION = type(lambda: None)
# Patches a plugin of the image makes to pytest's machinery while tests run, allowed only as the
# plugin's own code: (plugin module, its fixture, pytest's module, class, attribute, the function
# the fixture puts there). pytest-django runs each Django TestCase with a ``runtest`` of its own
# (``self._testcase(result=self)``, pytest's minus its --pdb handling) for the class's tests.
PLUGIN_PATCHES = (
    ("pytest_django.plugin", "_django_setup_unittest", "_pytest.unittest", "TestCaseFunction",
     "runtest", "non_debugging_runtest"),
)  # fmt: skip
PROC_MEMORY = re.compile(r"^/proc/(self|thread-self|\d+)(/task/\d+)?/mem$")
MACHINERY = ("pytest", "_pytest", "pluggy")
LEGACYPATH = "_pytest.legacypath"  # pytest's own patches of its classes, made as it starts
_CHANGED_EARLY = "pytest's machinery was changed before the tests ({}.{})"
_ABSENT = object()
# The hooks through which a test's outcome travels: their implementations are fixed at the end
# of collection (a plugin registered later, or an implementation swapped, is tampering).
HOOKS = (
    "pytest_runtestloop", "pytest_runtest_protocol", "pytest_runtest_setup",
    "pytest_runtest_call", "pytest_pyfunc_call", "pytest_runtest_teardown",
    "pytest_runtest_makereport", "pytest_runtest_logreport", "pytest_report_teststatus",
)  # fmt: skip


def install(send, protected):
    """The audit hook; ``send(why)`` records tampering on the grader's channel. ``protected``:
    the graded test files (absolute paths), whose functions' code may not be swapped, nor
    pytest's or pluggy's (a project's own decorators may swap its own code: typeguard does)."""
    files = [str(getattr(sys.modules.get(name), "__file__", "") or "") for name in MACHINERY]
    folders = tuple(os.path.dirname(os.path.abspath(f)) + os.sep for f in files if f)
    # The standard library's doctest runner puts back the tracer it found when each doctest
    # ends: the one call of settrace a graded run needs, allowed when it comes from that very
    # function (its code object, taken now: a function compiled under doctest's file name and
    # called ``run`` is another) and what it puts back is none (read from its own frame, not
    # from ``sys.gettrace``, which code under test can rebind).
    runner = getattr(sys.modules.get("doctest"), "DocTestRunner", None)
    doctest_run = getattr(getattr(runner, "run", None), "__code__", None)

    def restores_no_tracer(event):
        if event != "sys.settrace" or doctest_run is None:
            return False
        caller = _getframe(2)  # 0: this, 1: the hook, 2: who called settrace
        if caller.f_code is not doctest_run:
            return False
        return "save_trace" in caller.f_locals and caller.f_locals["save_trace"] is None

    def swapped(function):
        code = getattr(function, "__code__", None)
        where = getattr(code, "co_filename", "")
        return where in protected or where.startswith(folders)

    def hook(event, args):
        why = REFUSED.get(event)
        if why is not None and restores_no_tracer(event):
            return
        if why is None:
            if event == "object.__setattr__" and args[1:2] == ("__code__",) and swapped(args[0]):
                why = "a test's or pytest's code swapped (__code__)"
            elif event == "open" and args and _proc_memory(args[0]):
                why = f"process memory opened ({args[0]!r})"
            elif event == "ctypes.dlsym" and len(args) > 1 and _c_api(args[1]):
                why = f"the interpreter's C API through ctypes ({args[1]!r})"
            else:
                return
        send(why)
        raise RuntimeError(f"trajforge grader: {why} is refused while graded tests run")

    sys.addaudithook(hook)


def _proc_memory(path):
    if isinstance(path, bytes):
        path = path.decode("utf-8", "replace")
    return isinstance(path, str) and bool(PROC_MEMORY.match(_normpath(path)))


def _c_api(name):
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    return isinstance(name, str) and name.lstrip("_").startswith("Py")


class Integrity:
    """What the seal fixed, and the checks against it (each returns a reason or "")."""

    def __init__(self):
        self.machinery = []  # fixed as the initial conftests' hook begins; pytest's own admitted
        self.early = ""  # a change made between the two, not pytest's own
        self.allowed = {}  # (id(holder), name) -> the code a plugin of the image may put there
        self.hooks = None  # fixed when collection ends
        self.codes = {}  # test file -> the code objects it compiles to, rewritten (``_compiled``)
        self.plain = {}  # test file -> those it compiles to plainly, when asked (``_plain``)
        self._index, self._indexed = [], None  # ``machinery`` in columns (``_by_kind``)

    def fix_machinery(self):
        """As ``pytest_load_initial_conftests`` begins: the plugins are imported, no
        implementation of that hook (nor any conftest) has run."""
        self.machinery = _machinery()
        self.allowed = _plugin_patches()

    def admit_own_patches(self):
        """When the initial conftests are loaded: the machinery as it is now, where every change
        since ``fix_machinery`` must be pytest's own (a function ``_pytest.legacypath`` held
        then, or a property of them); any other is a forgery made before the first test."""
        own = {id(v) for h, _, v in self.machinery if getattr(h, "__name__", "") == LEGACYPATH}
        before = {(id(holder), name): value for holder, name, value in self.machinery}
        classes = {id(holder) for holder, _, _ in self.machinery if isinstance(holder, type)}
        now = _machinery()
        seen = set()  # a class two modules export is listed twice
        for holder, name, value in now:
            seen.add((id(holder), name))
            old = before.get((id(holder), name), _ABSENT)
            if old is value or (old is _ABSENT and id(holder) not in classes):
                continue  # unchanged; a module global pytest binds as it runs; a module's new class
            if not _pytests_own(value, own):
                self.early = _CHANGED_EARLY.format(_name(holder), name)
                break
        gone = [m for m in self.machinery if (id(m[0]), m[1]) not in seen]  # deleted: a method
        if gone and not self.early:  # gone exposes its base class's
            self.early = _CHANGED_EARLY.format(_name(gone[0][0]), gone[0][1])
        self.machinery = now

    def fix_hooks(self, config):
        self.hooks = _hook_state(config)

    def check(self, item):
        """Why the run that is about to grade ``item`` (or just did) cannot be trusted."""
        if self.early:
            return self.early
        if self._indexed is not self.machinery:
            self._index, self._indexed = _by_kind(self.machinery), self.machinery
        # every name still bound to its fixed object, compared in C (1.2 ms a check in Python
        # for pytest's 3,000-odd names, twice a graded test); only a difference is looked at
        unchanged = (all(map(is_, map(get, spaces, names), values))
                     for get, spaces, names, values in self._index)  # fmt: skip
        if not all(unchanged):
            for holder, name, value in self.machinery:
                now = getattr(holder, "__dict__", {}).get(name)
                if now is not value and not self._allowed(holder, name, now):
                    return f"pytest's machinery was changed ({_name(holder)}.{name})"
        if self.hooks is not None and _hook_state(item.config) != self.hooks:
            return "a plugin or hook implementation was added or changed after collection"
        for name in vars(item):
            if _method(type(item), name):
                return f"the test item's {name} was replaced"
        return self._code(item)

    def _allowed(self, holder, name, value):
        """A plugin's own patch (``PLUGIN_PATCHES``): a function of exactly its code."""
        codes = self.allowed.get((id(holder), name), ())
        return isinstance(value, FUNCTION) and value.__code__ in codes

    def _code(self, item):
        path = str(getattr(item, "path", None) or getattr(item, "fspath", ""))
        function = getattr(item, "obj", None)
        function = getattr(function, "__func__", function)
        inner, defined_here = function, None
        for _ in range(32):  # the decorators' chain (functools.wraps keeps __wrapped__)
            code = getattr(inner, "__code__", None)
            if code is not None and code.co_filename == path:
                defined_here = code
            following = getattr(inner, "__wrapped__", None)
            if following is None:
                break
            inner = following
        if not path.endswith(".py") or not _isfile(path):
            return ""
        if path not in self.codes:
            self.codes[path] = _compiled(path, item.config)
        rewritten, undecorated, source = self.codes[path]
        if defined_here is not None:
            if defined_here in rewritten:
                return ""
            if path not in self.plain:
                self.plain[path] = _plain(path, source)
            return "" if defined_here in self.plain[path] else (
                f"{item.nodeid} does not run its file's code"
            )  # fmt: skip
        name = getattr(item, "originalname", None) or item.name.split("[", 1)[0]
        if _place(item, name) in undecorated:
            return f"{item.nodeid} does not run its file's code"
        return ""


def _place(item, name):
    """Where the file would define the test: ``Class.name`` (``Outer.Inner.name``) for a method,
    by the names the classes were collected under (the module's own names for them, whatever
    class objects they hold now); ``name`` for a function."""
    kind = _CLASS_NODE
    classes = [node.name for node in item.listchain() if kind and isinstance(node, kind)]
    return ".".join([*classes, name])


def _compiled(path, config):
    """(the code objects ``path`` compiles to with pytest's assertion rewriting, as pytest's own
    import compiles a test module; the places of the functions it defines with no decorator; its
    source, compiled plainly only when a test's code is not among the rewritten ones: one parse
    and one compile per file where there were two of each)."""
    with open(path, "rb") as handle:
        source = handle.read()
    codes: set = set()
    undecorated: set = set()
    try:
        tree = _parse(source, filename=path)
    except SyntaxError:
        return codes, undecorated, b""
    _undecorated(tree, undecorated)
    try:
        if _REWRITE is not None:
            _REWRITE(tree, source, path, config)  # the tree is not read again after this
            _walk(compile(tree, path, "exec", dont_inherit=True), codes)
    except Exception:  # an older pytest's signature: the plain code still counts
        pass
    return codes, undecorated, source


def _undecorated(tree, found):
    """The functions with no decorator that ``tree`` defines, by their place: ``name`` in the
    module's body (inside an ``if`` or a ``try`` too), ``Class.name`` in a class's. A test a class
    inherits from another file is none of its file's: another class's method of that name, or a
    module function, is no claim on it. (A stack, not recursion: no nesting depth stops it.)"""
    stack = [(tree, "")]
    while stack:
        node, prefix = stack.pop()
        for child in _children(node):
            if isinstance(child, _FUNCTIONS):
                if not child.decorator_list:
                    found.add(prefix + child.name)
            elif isinstance(child, _CLASS):
                stack.append((child, f"{prefix}{child.name}."))
            else:
                stack.append((child, prefix))


def _plain(path, source):
    """Every code object ``path``'s source compiles to with no rewriting."""
    codes: set = set()
    if source:
        _walk(compile(source, path, "exec", dont_inherit=True), codes)
    return codes


def _plugin_patches():
    """(id(holder), name) -> the code objects each of ``PLUGIN_PATCHES`` compiled, read from the
    plugin's module as the image loaded it (before any conftest: the machinery's moment). Any
    function with one of these codes does only what the plugin's does, whoever made it."""
    allowed = {}
    for module_name, fixture, owner_module, owner, name, function_name in PLUGIN_PATCHES:
        holder = getattr(sys.modules.get(owner_module), owner, None)
        outer = _fixture_function(getattr(sys.modules.get(module_name), fixture, None))
        code = getattr(outer, "__code__", None)
        if holder is None or code is None:
            continue
        nested: set = set()
        _walk(code, nested)
        allowed[(id(holder), name)] = frozenset(
            c for c in nested if c is not code and c.co_name == function_name
        )
    return allowed


def _fixture_function(value):
    """The function a fixture decorator wraps (pytest 8.4+'s definition object, older pytest's
    ``__pytest_wrapped__``), or ``value`` itself."""
    for _ in range(4):
        inner = getattr(value, "_fixture_function", None)
        wrapped = getattr(value, "__pytest_wrapped__", None)
        inner = inner or getattr(wrapped, "obj", None) or getattr(value, "__wrapped__", None)
        if inner is None:
            return value
        value = inner
    return value


def _walk(code, into):
    into.add(code)
    for const in code.co_consts:
        if isinstance(const, type(code)):
            _walk(const, into)


def _machinery():
    """(holder, name, value) of every function and class of pytest and pluggy, and of each
    method their classes define."""
    fixed: list = []
    for module_name, module in list(sys.modules.items()):
        if module is None or module_name.split(".", 1)[0] not in MACHINERY:
            continue
        for name, value in list(vars(module).items()):
            owner = str(getattr(value, "__module__", "") or "")
            if not isinstance(value, (type, FUNCTION)) or owner.split(".")[0] not in MACHINERY:
                continue  # what pytest rebinds while it runs (None until then) is not fixed
            fixed.append((module, name, value))
            if isinstance(value, type) and owner == module_name:
                for attr, member in list(vars(value).items()):
                    if _is_method(member):
                        fixed.append((value, attr, member))
    return fixed


def _by_kind(machinery):
    """``machinery`` as flat columns per kind of namespace (a module's dict, a class's
    mappingproxy): (that kind's own ``get``, the holders' namespaces, names, fixed objects). A
    module's ``__dict__`` is never replaced, and a class's is a live view of its namespace."""
    columns: dict = {}
    for holder, name, value in machinery:
        space = getattr(holder, "__dict__", {})
        column = columns.setdefault(type(space), ([], [], []))
        column[0].append(space)
        column[1].append(name)
        column[2].append(value)
    return [(kind.get, tuple(a), tuple(b), tuple(c)) for kind, (a, b, c) in columns.items()]


def _pytests_own(value, own):
    """Whether ``value`` is one of pytest's own patches: a function of ``own`` (by identity),
    or a property made of them."""
    if isinstance(value, property):
        parts = [f for f in (value.fget, value.fset, value.fdel) if f is not None]
        return bool(parts) and all(id(f) in own for f in parts)
    return id(value) in own


def _hook_state(config):
    manager = config.pluginmanager
    state: list = [frozenset(id(p) for p in manager.get_plugins())]
    for name in HOOKS:
        caller = getattr(manager.hook, name, None)
        impls = caller.get_hookimpls() if caller is not None else []
        state.append(tuple((id(i), id(i.function)) for i in impls))
    state.append(id(config.hook))
    return state


def _method(cls, name):
    for klass in cls.__mro__:
        if name in vars(klass):
            return _is_method(vars(klass)[name])
    return False


def _is_method(member):
    return isinstance(member, (staticmethod, classmethod, property)) or (
        callable(member) and not isinstance(member, type)
    )


def _name(holder):
    return getattr(holder, "__name__", type(holder).__name__)
