"""The one line that names why a build failed, and the system packages its log asks for.

The logs are written in the shapes pip 25/26, uv and ``docker build`` print (the pip ones cut
from real failed builds of trajforge's own recipes here), each ending with Docker's echo of the
build script, which must never be the line chosen.
"""

from __future__ import annotations

import pytest
from trajforge.generators.environments.build_errors import (
    PIP_BOX,
    SYSTEM_PACKAGES,
    cause_line,
    loosening_can_help,
    system_packages,
)

ESC = "\x1b"
X = PIP_BOX  # the cross before a failed step
# What the legacy builder prints last: the whole RUN script echoed, over several lines.
DOCKER_ECHO = """\
error: The command '/bin/sh -ec if [ -s /tmp/trajforge/ca.crt ]; then export PIP_CERT=/tmp/trajforge/ca.crt SSL_CERT_FILE=/tmp/trajforge/ca.crt REQUESTS_CA_BUNDLE=/tmp/trajforge/ca.crt; fi
if [ -n "$PIP_INDEX" ]; then export PIP_INDEX_URL="$PIP_INDEX"; fi
touch /tmp/trajforge/stamp
set -x
python3 -m venv /venv
pip install -r requirements.txt
pip install 'pytest<8' coverage' returned a non-zero code: 1
"""  # noqa: E501

PIP_CONFLICT = f"""\
{ESC}[91m+ {ESC}[0m
{ESC}[91mpip{ESC}[0m
{ESC}[91m install -r requirements.txt{ESC}[0m
Collecting requests==2.31.0 (from -r requirements.txt (line 1))
  Downloading requests-2.31.0-py3-none-any.whl (62 kB)
Collecting urllib3==1.20 (from -r requirements.txt (line 2))
{ESC}[91mERROR: Cannot install -r requirements.txt (line 1) and urllib3==1.20 because these package versions have conflicting dependencies.
{ESC}[0m

The conflict is caused by:
    The user requested urllib3==1.20
    requests 2.31.0 depends on urllib3<3 and >=1.21.1

To fix this you could try to:
1. loosen the range of package versions you've specified
2. remove package versions to allow pip to attempt to solve the dependency conflict
{ESC}[91mERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/#dealing-with-dependency-conflicts
{ESC}[0m
{DOCKER_ECHO}"""  # noqa: E501

PIP_NO_FILE = f"""\
Collecting mecab-python3==1.0.5 (from -r requirements.txt (line 1))
  Downloading mecab-python3-1.0.5.tar.gz (77 kB)
  Discarding https://files.pythonhosted.org/packages/mecab-python3-1.0.5.tar.gz (from -r requirements.txt (line 1)) has inconsistent version: expected '1.0.5', but metadata has '0.0.0'
{ESC}[91mERROR: Could not find a version that satisfies the requirement mecab-python3==1.0.5 (from versions: 0.996.5, 1.0.4, 1.0.5, 1.0.6, 1.0.12)
{ESC}[0m
{ESC}[91mERROR: No matching distribution found for mecab-python3==1.0.5
{ESC}[0m
{DOCKER_ECHO}"""  # noqa: E501

PIP_OTHER_PYTHON = f"""\
{ESC}[91mERROR: Ignored the following versions that require a different python version: 1.25.0 Requires-Python >=3.9; 1.26.4 Requires-Python >=3.9; 2.0.0 Requires-Python >=3.9
ERROR: Could not find a version that satisfies the requirement numpy==1.26.4 (from versions: 1.19.5, 1.24.4)
ERROR: No matching distribution found for numpy==1.26.4
{ESC}[0m
{DOCKER_ECHO}"""  # noqa: E501

PIP_UNKNOWN_NAME = f"""\
Looking in indexes: https://pypi.internal.example/simple
{ESC}[91mERROR: Could not find a version that satisfies the requirement trajforge-private-toolkit==2.1.0 (from versions: none)
ERROR: No matching distribution found for trajforge-private-toolkit==2.1.0
{ESC}[0m
{DOCKER_ECHO}"""  # noqa: E501

PIP_NO_SUCH_VERSION = """\
ERROR: Could not find a version that satisfies the requirement attrs==99.1 (from versions: 21.4.0, 23.2.0, 25.3.0)
ERROR: No matching distribution found for attrs==99.1
"""  # noqa: E501

PIP_PROJECT_PYTHON = f"""\
Obtaining file:///repo
{ESC}[91mERROR: Package 'widget' requires a different Python: 3.11.2 not in '>=3.14'
{ESC}[0m
{DOCKER_ECHO}"""

UV_NO_SOLUTION = f"""\
+ pip install -r requirements.txt
  {X} No solution found when resolving dependencies:
  ╰─▶ Because requests==2.31.0 depends on urllib3>=1.21.1,<3 and you require urllib3==1.20, we
      can conclude that you require requests!=2.31.0.
      And because you require requests==2.31.0, we can conclude that your requirements are
      unsatisfiable.

      hint: Pre-releases are available for `urllib3` in the requested range
trajforge: uv refused this step; pip installs it
"""

UV_PYTHON = f"""\
  {X} No solution found when resolving dependencies:
  ╰─▶ Because the current Python version (3.11.2) does not satisfy Python>=3.12 and widget==1.0 depends on Python>=3.12, we can conclude that widget==1.0 cannot be used.
"""  # noqa: E501

# uv without a terminal, then pip trying the same step (recipe.py's shell function): the build
# ended on pip's attempt, so pip's words name it.
UV_THEN_PIP = f"""\
{ESC}[91merror: No solution found when resolving dependencies
  cause: Because trajforge-h3-no-such-dist was not found in the package registry and you require trajforge-h3-no-such-dist==1.0.0, we can conclude that your requirements are unsatisfiable.
{ESC}[0m
{ESC}[91m+ [{ESC}[0m
trajforge: uv failed, pip installs: -r requirements.txt
{ESC}[91m -x /opt/trajforge-tools/bin/uv ]
+ /venv/bin/pip install -r requirements.txt
{ESC}[0m
{ESC}[91mERROR: Could not find a version that satisfies the requirement trajforge-h3-no-such-dist==1.0.0 (from versions: none)
{ESC}[0m
{ESC}[91mERROR: No matching distribution found for trajforge-h3-no-such-dist==1.0.0
{ESC}[0m
{DOCKER_ECHO}"""  # noqa: E501

SCM_METADATA = f"""\
Obtaining file:///repo
  Installing build dependencies: finished with status 'done'
  Getting requirements to build editable: started
  Getting requirements to build editable: finished with status 'error'
{ESC}[91m  error: subprocess-exited-with-error

  {X} Getting requirements to build editable did not run successfully.
  │ exit code: 1
  ╰─> [14 lines of output]
      Traceback (most recent call last):
        File "/venv/lib/python3.11/site-packages/setuptools_scm/_get_version_impl.py", line 97
      LookupError: setuptools-scm was unable to detect version for /repo.

      Make sure you're either building from a fully intact git repository or PyPI tarballs.
      [end of output]

  note: This error originates from a subprocess, and is likely not a problem with pip.
{ESC}[0m
{ESC}[91merror: subprocess-exited-with-error
{ESC}[0m
{DOCKER_ECHO}"""

NO_COMPILER = f"""\
  Building editable for cx (pyproject.toml): finished with status 'error'
{ESC}[91m  error: subprocess-exited-with-error

  {X} Building editable for cx (pyproject.toml) did not run successfully.
  │ exit code: 1
  ╰─> [15 lines of output]
      running build_ext
      building 'cx._y' extension
      x86_64-linux-gnu-gcc -Wsign-compare -DNDEBUG -g -fwrapv -O2 -Wall -fPIC -I/venv/include -I/usr/include/python3.11 -c cx/y.c -o /tmp/build-temp/cx/y.o
      error: [Errno 2] No such file or directory: 'x86_64-linux-gnu-gcc'
      [end of output]
{ESC}[0m
{ESC}[91m  ERROR: Failed building editable for cx
{ESC}[0m
{DOCKER_ECHO}"""  # noqa: E501

MISSING_HEADER = f"""\
      building 'cx._y' extension
      x86_64-linux-gnu-gcc -fPIC -I/venv/include -I/usr/include/python3.11 -c cx/y.c -o build/cx/y.o
      cx/y.c:2:10: fatal error: yaml.h: No such file or directory
          2 | #include <yaml.h>
            |          ^~~~~~~~
      compilation terminated.
      error: command '/usr/bin/x86_64-linux-gnu-gcc' failed with exit code 1
      [end of output]
{ESC}[91m  ERROR: Failed building editable for cx
{ESC}[0m
{DOCKER_ECHO}"""

BUILDKIT_TIMEOUT = """\
#9 12.31 Collecting torch==2.1.0
#9 600.0 build timed out after 600 s
ERROR: failed to solve: process "/bin/sh -ec if [ -s /tmp/trajforge/ca.crt ]; then export PIP_CERT=/tmp/trajforge/ca.crt; fi" did not complete successfully: exit code: 1
"""  # noqa: E501


@pytest.mark.parametrize(
    ("log", "line"),
    [
        (
            PIP_CONFLICT,
            "ResolutionImpossible: requested urllib3==1.20 vs requests 2.31.0 depends on "
            "urllib3<3 and >=1.21.1",
        ),
        (
            PIP_NO_FILE,
            "No matching distribution found for mecab-python3==1.0.5 "
            "(no file of 1.0.5 installs on Python 3.11)",
        ),
        (
            PIP_OTHER_PYTHON,
            "No matching distribution found for numpy==1.26.4 (1.26.4 requires Python >=3.9)",
        ),
        (
            PIP_UNKNOWN_NAME,
            "No matching distribution found for trajforge-private-toolkit==2.1.0 "
            "(the index has no release of it for Python 3.11)",
        ),
        (
            PIP_NO_SUCH_VERSION,
            "No matching distribution found for attrs==99.1 (no release 99.1; the newest is "
            "25.3.0)",
        ),
        (PIP_PROJECT_PYTHON, "widget wants Python >=3.14 (the image has 3.11.2)"),
        (
            UV_NO_SOLUTION,
            "no solution: Because requests==2.31.0 depends on urllib3>=1.21.1,<3 and you require "
            "urllib3==1.20, we can conclude that you require requests!=2.31.0. And because you "
            "require requests==2.31.0, we can conclude that your requirements are unsatisfiable.",
        ),
        (UV_PYTHON, "widget wants Python >=3.12 (the image has 3.11.2)"),
        (
            UV_THEN_PIP,
            "No matching distribution found for trajforge-h3-no-such-dist==1.0.0 "
            "(the index has no release of it for Python 3.11)",
        ),
        (
            UV_THEN_PIP.split("trajforge: uv failed")[0],  # uv alone, with no terminal
            "no solution: Because trajforge-h3-no-such-dist was not found in the package "
            "registry and you require trajforge-h3-no-such-dist==1.0.0, we can conclude that "
            "your requirements are unsatisfiable.",
        ),
        (
            SCM_METADATA,
            "metadata generation failed: setuptools-scm could not find a version (no .git)",
        ),
        (
            NO_COMPILER,
            "no C compiler in the image (x86_64-linux-gnu-gcc; build-essential, python3-dev)",
        ),
        (MISSING_HEADER, "missing header yaml.h (libyaml-dev)"),
        (BUILDKIT_TIMEOUT, "build timed out after 600 s"),
    ],
)
def test_the_cause_is_one_line_in_the_tools_words(log: str, line: str) -> None:
    said = cause_line(log, "3.11")
    assert said == line
    assert "/bin/sh" not in said and "\n" not in said


def test_dockers_echo_of_the_script_is_never_the_cause() -> None:
    """A log with nothing but the echo says so, rather than quoting the script."""
    step = 'Step 6/25 : RUN ["/bin/sh", "-ec", "apt-get install -y libffi-dev libjpeg-dev"]'
    assert cause_line(f"{step}\nCollecting six\n{DOCKER_ECHO}") == "Collecting six"
    assert system_packages(f"{step}\n{DOCKER_ECHO}") == ()  # the script's words are no evidence
    assert cause_line(DOCKER_ECHO) == "no output"
    assert "/bin/sh" not in cause_line("ERROR: Failed building wheel for cx\n" + DOCKER_ECHO)


def test_a_long_cause_is_cut_to_one_readable_line() -> None:
    log = "ERROR: No matching distribution found for " + "x" * 500 + "\n" + DOCKER_ECHO
    assert len(cause_line(log)) == 300


# One log line per family, in the words the build tools print; the packages that answer it.
FAMILIES = [
    ("fatal error: libxml/xmlversion.h: No such file or directory", "libxml2-dev"),
    ("fatal error: libxslt/xsltconfig.h: No such file or directory", "libxslt1-dev"),
    ("c/_cffi_backend.c:15:10: fatal error: ffi.h: No such file or directory", "libffi-dev"),
    ("fatal error: openssl/ssl.h: No such file or directory", "libssl-dev"),
    ("fatal error: Python.h: No such file or directory", "python3-dev"),
    ("fatal error: zlib.h: No such file or directory", "zlib1g-dev"),
    ("fatal error: jpeglib.h: No such file or directory", "libjpeg-dev"),
    ("fatal error: png.h: No such file or directory", "libpng-dev"),
    ("fatal error: yaml.h: No such file or directory", "libyaml-dev"),
    ("Modules/LDAPObject.c:9:10: fatal error: lber.h: No such file or directory", "libldap2-dev"),
    ("fatal error: sasl/sasl.h: No such file or directory", "libsasl2-dev"),
    ("/bin/sh: 1: krb5-config: not found", "libkrb5-dev"),
    ("Error: pg_config executable not found.", "libpq-dev"),
    ("fatal error: libpq-fe.h: No such file or directory", "libpq-dev"),
    ("OSError: mysql_config not found", "default-libmysqlclient-dev"),
    ("fatal error: gmp.h: No such file or directory", "libgmp-dev"),
    ("fatal error: hdf5.h: No such file or directory", "libhdf5-dev"),
    ("Package cairo was not found in the pkg-config search path.", "libcairo2-dev"),
    ("fatal error: portaudio.h: No such file or directory", "portaudio19-dev"),
    ("fatal error: ft2build.h: No such file or directory", "libfreetype-dev"),
    ("fatal error: bzlib.h: No such file or directory", "libbz2-dev"),
    ("fatal error: lzma.h: No such file or directory", "liblzma-dev"),
    ("fatal error: sqlite3.h: No such file or directory", "libsqlite3-dev"),
    ("fatal error: curses.h: No such file or directory", "libncurses-dev"),
    ("fatal error: readline/readline.h: No such file or directory", "libreadline-dev"),
    ("OSError: Could not find geos-config executable", "libgeos-dev"),
    ("FileNotFoundError: [Errno 2] No such file or directory: 'gdal-config'", "libgdal-dev"),
    ("fatal error: snappy-c.h: No such file or directory", "libsnappy-dev"),
    # EnvBench's oadoi (pdftotext): after libpq-dev, this was the header no package answered
    (
        "fatal error: poppler/cpp/poppler-document.h: No such file or directory",
        "libpoppler-cpp-dev",
    ),
    ("fatal error: sndfile.h: No such file or directory", "libsndfile1-dev"),
    ("fatal error: xmlsec/xmlsec.h: No such file or directory", "libxmlsec1-dev"),
    ("/bin/sh: 1: pkg-config: not found", "pkg-config"),
    ("error: command 'gcc' failed: No such file or directory", "build-essential"),
    ("unable to execute 'x86_64-linux-gnu-gcc': No such file or directory", "build-essential"),
    ("/bin/sh: 1: x86_64-linux-gnu-gcc: not found", "build-essential"),
    ("RuntimeError: Broken toolchain: cannot link a simple C program", "build-essential"),
    ("error: can't find Rust compiler", "cargo"),
]


@pytest.mark.parametrize(("evidence", "package"), FAMILIES)
def test_each_family_gets_the_package_that_provides_it(evidence: str, package: str) -> None:
    log = f"Building wheel for x (pyproject.toml): started\n      {evidence}\n{DOCKER_ECHO}"
    found = system_packages(log)
    assert package in found, found
    if package != "cargo":  # C families come with the compiler the base image lacks
        assert "build-essential" in found
    else:
        assert found == ("cargo", "rustc")
    assert not loosening_can_help(log)  # a looser pin would not bring the header
    assert package in cause_line(log)  # the line names what to install


def test_every_family_in_the_table_is_tested() -> None:
    tested = {p for _, p in FAMILIES}
    for _, packages, what in SYSTEM_PACKAGES:
        assert tested & set(packages), what


def test_no_evidence_asks_for_nothing() -> None:
    for log in (PIP_CONFLICT, PIP_NO_FILE, UV_NO_SOLUTION, SCM_METADATA):
        assert system_packages(log) == ()


def test_loosening_helps_only_where_a_pin_is_the_cause() -> None:
    assert loosening_can_help(PIP_CONFLICT)
    assert loosening_can_help(PIP_NO_FILE)
    assert loosening_can_help(UV_NO_SOLUTION)
    assert not loosening_can_help(PIP_UNKNOWN_NAME)  # no release of the name at all
    assert not loosening_can_help(PIP_PROJECT_PYTHON)  # the project's own Python
    assert not loosening_can_help(BUILDKIT_TIMEOUT)
