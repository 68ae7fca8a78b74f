"""Services a suite expects (issue 43 item 3): named by the project's compose file or CI, installed
from Debian's packages in the environment image and started by its entrypoint, so the suite
runs with them on 127.0.0.1 and still no network.

First what the files name and the settings CI gives them (no container), then a repository
whose tests talk to Redis, memcached, PostgreSQL and MariaDB where its CI says, mined and
validated through the CLI with its gold graded, and the sealing: nothing a test says to Redis
names a path; PostgreSQL's role writes no file and runs no program, its superuser takes no
connection; MariaDB writes files only into its own folder; a restart forgets a run's data.
"""

from __future__ import annotations

import difflib
import json
import subprocess
import uuid
from pathlib import Path

import polars as pl
import pytest
from conftest import remove_built_images, run_cli, write_params
from repo_factory import RepoBuilder
from sandbox_backends import Backend, tar_of
from trajforge.generators.environments.recipe import render_dockerfile
from trajforge.generators.environments.service_env import env_lines
from trajforge.generators.environments.services import (
    Named,
    declaration_files,
    image_base,
    services_named,
    with_services,
)
from trajforge.generators.languages.python.profile import detect_profile
from trajforge.generators.languages.registry import language_named
from trajforge.pipelines.release.harbor import services_sh
from trajforge.schemas.params import Params
from trajforge.verifiers.sandbox import ready as ready_module
from trajforge.verifiers.sandbox.base import ImageBuild, SandboxBroken, SessionSpec
from trajforge.verifiers.sandbox.docker import DockerSandbox
from trajforge.verifiers.sandbox.ready import (
    HOSTS_LABEL,
    READY_FILE,
    READY_LABEL,
    SERVICES_ENTRYPOINT,
    USERS_LABEL,
    host_names,
    hosts,
    ready_file,
    switches_user,
)

COMPOSE = """\
services:
  app:
    build: .
  cache:
    image: docker.io/library/redis:7-alpine
  db:
    image: postgres:16
"""
WORKFLOW = """\
env:
  PGCONNECT_TIMEOUT: 10
jobs:
  test:
    runs-on: ubuntu-latest
    env:
      DATABASE_URL: postgresql://kv:secret@localhost:${{ job.services.pg.ports[5432] }}/kvtest
      TEST_DB_NOTE: 'a "$HOME" note'
      PATH: /planted/bin
      PYTHONPATH: /planted
      REDIS_PASSWORD: ${{ secrets.REDIS }}
    services:
      memcached:
        image: memcached:1.6
        ports: ["11211:11211"]
      matrixed:
        image: ${{ matrix.cache }}
      pg:
        image: postgres:16
        env:
          POSTGRES_USER: kv
          POSTGRES_DB: kvtest
          POSTGRES_PASSWORD: secret
      mysql:
        image: mysql:8.0
        env:
          MYSQL_ROOT_PASSWORD: rootpw
          MYSQL_DATABASE: kvtest
          MYSQL_USER: kv
          MYSQL_PASSWORD: "kv'pw"
  valkey:
    services:
      store:
        image: valkey/valkey:${{ matrix.valkey-version }}
    steps:
      - uses: actions/checkout@v4
      - uses: Supercharge/redis-github-action@1.8.1
      - name: tests
        env:
          REDIS_URL: redis://localhost:6379/1
      - name: tests again
        env:
          REDIS_URL: redis://localhost:6379/2
"""
GITLAB = """\
variables:
  POSTGRES_DB: "not an identifier"
services:
  - redis:7
test:
  services:
    - name: mariadb:11
    - postgis/postgis:16-3.4
"""


def test_the_files_name_their_services() -> None:
    paths = [
        ".github/workflows/ci.yml", "docker-compose.yml", "compose.test.yaml", ".gitlab-ci.yml",
        "sub/docker-compose.yml", "src/compose.py", ".github/workflows/nested/x.yml",
    ]  # fmt: skip
    assert declaration_files(paths) == [
        ".github/workflows/ci.yml", ".gitlab-ci.yml", "compose.test.yaml", "docker-compose.yml",
    ]  # fmt: skip
    images = ("redis", "bitnami/redis:7.2", "ghcr.io/x/valkey@sha256:ab")
    assert [image_base(image) for image in images] == ["redis", "redis", "valkey"]
    named = services_named(
        {
            "docker-compose.yml": COMPOSE.encode(),
            ".github/workflows/ci.yml": WORKFLOW.encode(),
            ".gitlab-ci.yml": GITLAB.encode(),
            "compose.yaml": b"services: [unclosed",  # not YAML: names nothing
        }
    )
    assert named.started == ("mariadb", "memcached", "postgres", "redis")
    # the names a suite reaches them by: compose's and the workflow's service keys, GitLab's
    # image names; none for an image that is not started (nginx, PostGIS, an expression)
    assert named.hosts == ("cache", "db", "mariadb", "memcached", "mysql", "pg", "redis", "store")
    assert named.not_started == (
        "postgis/postgis:16-3.4 (.gitlab-ci.yml): PostGIS is not started (Debian's PostgreSQL "
        "has no PostGIS of the image's version)",
    )
    # the connection settings CI gives them: never PATH or PYTHONPATH, never an expression
    # (a service's port expression is its usual port), never a bad name or password for SQL
    # (MYSQL_PASSWORD has a quote)
    assert named.environment == (
        "DATABASE_URL=postgresql://kv:secret@localhost:5432/kvtest",
        "MYSQL_DATABASE=kvtest",
        "MYSQL_ROOT_PASSWORD=rootpw",
        "MYSQL_USER=kv",
        "PGCONNECT_TIMEOUT=10",
        "POSTGRES_DB=kvtest",
        "POSTGRES_PASSWORD=secret",
        "POSTGRES_USER=kv",
        "REDIS_URL=redis://localhost:6379/1",
        'TEST_DB_NOTE=a "$HOME" note',
    )
    assert env_lines(['TEST_DB_NOTE=a "$HOME" \\ note']) == [
        'ENV TEST_DB_NOTE="a \\"\\$HOME\\" \\\\ note"'
    ]
    assert services_named({".gitlab-ci.yml": GITLAB.encode()}).environment == ()
    # settings only where a service is started: every other profile renders as it did
    plain = services_named({".github/workflows/ci.yml": b"env:\n  DATABASE_URL: x\njobs: {}\n"})
    assert plain == Named()
    assert (
        services_named({"docker-compose.yml": b"services:\n  web:\n    image: nginx\n"}) == Named()
    )


def test_a_profile_without_services_renders_as_before() -> None:
    """No line of theirs when there is none: every other profile keeps its id and image."""
    plain = render_dockerfile("3.11", ["pip install -e ."])
    assert render_dockerfile("3.11", ["pip install -e ."], services=()) == plain
    assert "ENTRYPOINT" not in plain and READY_LABEL not in plain
    served = render_dockerfile("3.11", ["pip install -e ."], services=["redis"])
    assert served.startswith(plain.rsplit("\n", 1)[0].split("FROM ${BASE}\n")[0])
    assert 'ENTRYPOINT ["/usr/local/bin/trajforge-services"]' in served
    with pytest.raises(ValueError, match="not services trajforge starts"):
        render_dockerfile("3.11", [], services=["postgis"])
    # PostgreSQL runs as its own user: the image says so, and only then
    assert USERS_LABEL not in served
    with_postgres = render_dockerfile("3.11", [], services=["postgres", "redis"])
    assert with_postgres.endswith(f' {USERS_LABEL}="postgres"\n')


@pytest.mark.parametrize(
    ("language", "files"),
    [
        ("javascript", {"package.json": '{"name": "q", "scripts": {"test": "node --test"}}\n'}),
        ("go", {"go.mod": "module example.com/q\n\ngo 1.19\n", "q.go": "package q\n"}),
    ],
)
def test_every_language_starts_them_in_its_image(language, files, tmp_path: Path) -> None:
    """One place for every language (``with_services``): JavaScript's and Go's profiles name
    them, and their recipes install them in the image's stage before the commit's files."""
    repo = RepoBuilder(tmp_path / language)
    plain = repo.commit("project", files)
    served = repo.commit("a compose file", {"docker-compose.yml": COMPOSE})
    site = language_named(language).site()
    params = Params().check()
    before = site.profile(str(repo.path), plain, "local/q", "file:///q", params)
    after = site.profile(str(repo.path), served, "local/q", "file:///q", params)
    assert before.services == () and "ENTRYPOINT" not in before.recipe
    assert after.services == ("postgres", "redis") and after.profile_id != before.profile_id
    lines = after.recipe.splitlines()
    last_stage = max(i for i, line in enumerate(lines) if line.startswith("FROM "))
    assert "apt-get install" in lines[last_stage + 1] and "redis-server" in lines[last_stage + 1]
    assert lines[-2:] == [
        'ENTRYPOINT ["/usr/local/bin/trajforge-services"]',
        'LABEL trajforge.ready="/run/trajforge-services.ready" trajforge.services="postgres redis" '
        'trajforge.services-users="postgres" trajforge.service-hosts="cache db"',
    ]


def test_a_ready_label_is_waited_on_only_when_it_is_a_plain_path() -> None:
    assert ready_file({READY_LABEL: "/run/trajforge-services.ready"}) == (
        "/run/trajforge-services.ready"
    )
    for hostile in ("relative", "/run/$(reboot)", "/run/../etc/x", "/a b", ""):
        assert ready_file({READY_LABEL: hostile}) is None, hostile
    assert ready_file(None) is None


def test_only_host_names_are_mapped_whoever_wrote_the_label() -> None:
    """A compose file is the repository's and a label the image's: a name that is not a host
    name, a number, ``localhost`` or the engine's own name is never mapped."""
    said = ["Db", "cache", "ok_1.svc", "bad name", "$(reboot)", "localhost", "1.2.3.4", "-x",
            "a" * 70, "host.docker.internal", ""]  # fmt: skip
    assert host_names(said) == ("cache", "db", "ok_1.svc")
    label = " ".join(name for name in said if " " not in name)  # a label's names are words
    assert hosts({HOSTS_LABEL: label}) == dict.fromkeys(("cache", "db", "ok_1.svc"), "127.0.0.1")
    assert hosts({HOSTS_LABEL: ""}) == hosts(None) == {}
    assert host_names(f"s{i}" for i in range(40)) == tuple(sorted(f"s{i}" for i in range(40)))[:16]


def test_only_an_image_that_names_its_services_users_keeps_the_switch() -> None:
    assert switches_user({USERS_LABEL: "postgres"})
    for labels in ({USERS_LABEL: " "}, {READY_LABEL: "/run/x"}, {}, None):
        assert not switches_user(labels), labels


LATE = """\
FROM trajforge-base:py3.11
RUN printf '#!/bin/sh\\nsleep 3\\ntouch /run/late.ready\\nexec "$@"\\n' > /usr/local/bin/late \\
    && chmod 755 /usr/local/bin/late
ENTRYPOINT ["/usr/local/bin/late"]
LABEL trajforge.ready="{ready}"
"""
CONTEXT = tar_of({"README": b"nothing the build copies"})


@pytest.mark.docker
@pytest.mark.podman
def test_a_container_is_handed_out_once_its_entrypoint_says_it_is_ready(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Docker and podman alike: a session of an image with a ready label starts after the mark
    (its entrypoint takes three seconds); one whose entrypoint never marks is a SandboxBroken
    that says why in one line, and leaves no container behind."""
    sandbox = backend.sandbox()
    tags = []
    try:
        for ready in ("/run/late.ready", "/run/never.ready"):
            tag = f"trajforge-test-late:{uuid.uuid4().hex[:8]}"
            tags.append(tag)
            recipe = LATE.format(ready=ready)
            built = sandbox.build_image(ImageBuild(tag, recipe, CONTEXT, timeout_s=300))
            assert built.ok, built.log
        with sandbox.session(SessionSpec(tags[0])) as session:
            said = session.exec("test -e /run/late.ready && echo marked", 30, workdir="/")
        assert said.output.strip() == "marked", said.output
        monkeypatch.setattr(ready_module, "WAIT_S", 1)
        with pytest.raises(SandboxBroken) as broken, sandbox.session(SessionSpec(tags[1])):
            pass
        assert str(broken.value) == (
            f"{tags[1]}: its entrypoint did not mark it ready (/run/never.ready) within 1 s; its "
            "services log to /var/log/trajforge-services.log in the image"
        )
    finally:
        sandbox.close()
        for tag in tags:
            backend.cli("rmi", "-f", tag, check=False)
    mine = backend.cli("ps", "--all", "--quiet", "--filter", f"ancestor={tags[1]}")
    assert mine.strip() == "", mine


# Its entrypoint becomes nobody as a service that refuses root would; {users}: the label or none.
SWITCH = """\
FROM trajforge-base:py3.11
RUN printf '#!/bin/sh\\nsetpriv --reuid=65534 --regid=65534 --clear-groups id -u \
>/run/switched 2>&1\\ntouch /run/switch.ready\\nexec "$@"\\n' > /usr/local/bin/switch \\
    && chmod 755 /usr/local/bin/switch
ENTRYPOINT ["/usr/local/bin/switch"]
LABEL trajforge.ready="/run/switch.ready"{users}
"""


@pytest.mark.docker
@pytest.mark.podman
def test_every_session_of_an_image_whose_services_run_as_a_user_may_switch_to_it(
    backend: Backend,
) -> None:
    """A validate session (not grading) of an image labelled with its services' users keeps the
    capability to change user, so its entrypoint starts them as those users; without the label
    every capability is dropped, as for any session."""
    sandbox = backend.sandbox()
    tags, said = [], {}
    try:
        for users in (f' {USERS_LABEL}="nobody"', ""):
            tag = f"trajforge-test-switch:{uuid.uuid4().hex[:8]}"
            tags.append(tag)
            recipe = SWITCH.format(users=users)
            built = sandbox.build_image(ImageBuild(tag, recipe, CONTEXT, timeout_s=300))
            assert built.ok, built.log
            with sandbox.session(SessionSpec(tag)) as session:
                said[bool(users)] = session.exec("cat /run/switched", 30, workdir="/").output
    finally:
        sandbox.close()
        for tag in tags:
            backend.cli("rmi", "-f", tag, check=False)
    assert said[True].strip() == "65534", said
    assert "Operation not permitted" in said[False], said


HOSTED = """\
FROM trajforge-base:py3.11
LABEL trajforge.service-hosts="db cache b@d localhost"
"""


@pytest.mark.docker
@pytest.mark.podman
def test_a_container_reaches_the_services_by_the_names_its_image_gives_them(
    backend: Backend,
) -> None:
    """Docker and podman alike: the names in the image's hosts label are 127.0.0.1 in each of
    its containers (with no network), so a suite that reaches ``db`` as its compose file names
    it finds the service the entrypoint started there; a name that is not one is not mapped."""
    sandbox = backend.sandbox()
    tag = f"trajforge-test-hosts:{uuid.uuid4().hex[:8]}"
    try:
        built = sandbox.build_image(ImageBuild(tag, HOSTED, CONTEXT, timeout_s=300))
        assert built.ok, built.log
        with sandbox.session(SessionSpec(tag)) as session:
            found = session.exec("getent hosts db cache", 30, workdir="/").output
            table = session.exec("cat /etc/hosts", 30, workdir="/").output
    finally:
        sandbox.close()
        backend.cli("rmi", "-f", tag, check=False)
    assert sorted(line.split() for line in found.splitlines()) == [
        ["127.0.0.1", "cache"],
        ["127.0.0.1", "db"],
    ], found
    mapped = [line.split()[1:] for line in table.splitlines() if line.startswith("127.0.0.1")]
    assert mapped.count(["localhost"]) <= 1 and "b@d" not in table, table  # the engine's own


def docker(*args: str, check: bool = True) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check).stdout


# An image whose entrypoint marks its services ready three seconds after it starts.
ANSWERS_LATE = f"""\
FROM trajforge-base:py3.11
RUN printf '#!/bin/sh\\nsleep 3\\ntouch {READY_FILE}\\nexec "$@"\\n' > {SERVICES_ENTRYPOINT} \\
    && chmod 755 {SERVICES_ENTRYPOINT}
ENTRYPOINT ["{SERVICES_ENTRYPOINT}"]
"""


@pytest.mark.docker
def test_a_harbor_graders_script_waits_for_the_services_and_maps_their_hosts() -> None:
    """Harbor runs an image's entrypoint (its own command after it) but neither waits for the
    services' mark nor maps their hosts: a task folder's ``test.sh`` does both, as root, before
    it grades; an image without services gets no such line."""
    assert services_sh(render_dockerfile("3.11", ["pip install -e ."])) == ""
    recipe = with_services("FROM trajforge-base:py3.11\n", ["redis"], (), ["db", "cache"])
    script = services_sh(recipe)
    tag = f"trajforge-test-harbor-services:{uuid.uuid4().hex[:8]}"
    subprocess.run(["docker", "build", "-q", "-t", tag, "-"], input=ANSWERS_LATE.encode(),
                   check=True, capture_output=True)  # fmt: skip
    box = ""
    try:  # as Harbor's compose runs it: no network, `sh -c "sleep infinity"` after the entrypoint
        box = docker("run", "-d", "--network", "none", tag, "sh", "-c", "sleep infinity").strip()
        said = docker("exec", box, "sh", "-c", f"{script}{script}test -e {READY_FILE} && "
                      "getent hosts db cache && grep -c ' db$' /etc/hosts")  # fmt: skip
    finally:
        docker("rm", "-f", box, check=False) if box else None
        docker("rmi", "-f", tag, check=False)
    lines = said.splitlines()
    assert sorted(line.split() for line in lines[:2]) == [["127.0.0.1", "cache"],
                                                          ["127.0.0.1", "db"]], said  # fmt: skip
    assert lines[2:] == ["1"], said  # run twice (a verifier retried), mapped once


# --- a repository whose suite talks to Redis, memcached and PostgreSQL ---------------------------

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "kv"
version = "0.1.0"

[project.optional-dependencies]
test = ["pytest"]

[tool.setuptools]
packages = ["kv"]
"""
KV = '''\
import socket


def ask(port, line):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(line)
        return conn.recv(4096)


def bump(key):
    """Add two to ``key`` in Redis and return the new value."""
    ask(6379, b"INCRBY %s 1\\r\\n" % key.encode())
    return int(ask(6379, b"INCRBY %s {step}\\r\\n" % key.encode())[1:])
'''
TESTS = """\
import os
import socket
import subprocess

from kv import ask, bump


def test_redis_answers():
    assert ask(6379, b"PING\\r\\n") == b"+PONG\\r\\n"
    # and by the name the compose file gives it (``cache:``), as a compose app reaches it
    with socket.create_connection(("cache", 6379), timeout=5) as conn:
        conn.sendall(b"PING\\r\\n")
        assert conn.recv(64) == b"+PONG\\r\\n"


def test_memcached_answers():
    assert ask(11211, b"version\\r\\n").startswith(b"VERSION ")


def test_postgres_keeps_a_row():
    # where CI says (its DATABASE_URL: role kv, database kvtest); no IF NOT EXISTS: a second
    # run in a container whose database was not reset fails here
    sql = "CREATE TABLE kv (k text PRIMARY KEY, v int); INSERT INTO kv VALUES ('a', 42); "
    sql += "SELECT v || current_user || current_database() FROM kv"
    said = subprocess.run(["psql", os.environ["DATABASE_URL"], "-tAc", sql],
                          capture_output=True, text=True, timeout=60)
    assert said.stdout.split()[-1:] == ["42kvkvtest"], said.stderr
    assert os.environ["TEST_DB_NOTE"] == 'a "$HOME" note'


def test_mariadb_keeps_a_row():
    # as CI's root (MYSQL_ROOT_PASSWORD) in CI's database (MYSQL_DATABASE)
    sql = "CREATE TABLE kv (k varchar(8) PRIMARY KEY, v int); INSERT INTO kv VALUES ('a', 42); "
    sql += "SELECT CONCAT(v, DATABASE()) FROM kv"
    said = subprocess.run(["mariadb", "-h127.0.0.1", "-uroot",
                           "-p" + os.environ["MYSQL_ROOT_PASSWORD"], "-N", "-e", sql,
                           os.environ["MYSQL_DATABASE"]], capture_output=True, text=True,
                          timeout=60)
    assert said.stdout.split() == ["42kvtest"], said.stderr
"""
TEST_BUMP = """

def test_bump_adds_two():
    ask(6379, b"SET counter 40\\r\\n")
    assert bump("counter") == 42
"""


NOTHING_FIXED = """\
diff --git a/NOTES.md b/NOTES.md
new file mode 100644
--- /dev/null
+++ b/NOTES.md
@@ -0,0 +1 @@
+bump looked fine to me
"""


# What code under test would say to Redis (here in a grading session) to write a file as
# root where the grader reads: point its dump at another folder, load code, poke its internals.
ATTEMPTS = (
    KV.format(step=1)
    + """
for line in (b"CONFIG SET dir /venv", b"DEBUG SLEEP 0", b"MODULE LOAD /x.so", b"SAVE"):
    print(ask(6379, line + b"\\r\\n").decode().strip())
"""
)


# A source patch that fixes nothing and, at import inside the graded test process (the tests'
# user), asks the root Redis to write its dump as a .pth in the venv's site-packages: code every
# later Python of the session would run, making ``bump`` right. Redis has no CONFIG to aim it.
PLANT = """\

import site


def _say(line):
    with socket.create_connection(("127.0.0.1", 6379), timeout=5) as conn:
        conn.sendall(line + b"\\r\\n")
        return conn.recv(4096)


for line in (
    b"CONFIG SET dir " + site.getsitepackages()[0].encode(),
    b"CONFIG SET dbfilename forge.pth",
    b'SET forge "\\nimport kv; kv.bump = lambda key: 42\\n"',
    b"SAVE",
):
    _say(line)
"""


# (name, role, SQL) a test could send PostgreSQL to reach past its database.
PG_ATTEMPTS = (
    ("program", "postgres", "COPY (SELECT 1) TO PROGRAM 'touch /tmp/ran'"),
    ("file", "postgres", "COPY (SELECT 1) TO '/tmp/written'"),
    ("read", "postgres", "SELECT pg_read_file('/etc/shadow')"),
    ("superuser", "trajforge_admin", "SELECT 1"),
    ("table", "postgres", "CREATE TABLE left_behind (x int)"),
)
PG_LEFT = "SELECT count(*) FROM pg_tables WHERE tablename = 'left_behind'"
MARIADB_OUT = "SELECT 'import kv' INTO OUTFILE '/venv/lib/planted.pth'"


def source_patch(path: str, before: str, after: str) -> str:
    """A git diff that turns ``path`` from ``before`` into ``after``."""
    diff = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(diff)


def build_kv(path: Path) -> RepoBuilder:
    repo = RepoBuilder(path)
    files = {
        "pyproject.toml": PYPROJECT,
        "kv/__init__.py": KV.format(step=0),
        "tests/test_kv.py": TESTS,
        "docker-compose.yml": COMPOSE,
        ".github/workflows/ci.yml": WORKFLOW,
    }
    repo.commit("kv over Redis", files)
    repo.commit("Fix bump: it added one", {
        "kv/__init__.py": KV.format(step=1), "tests/test_kv.py": TESTS + TEST_BUMP,
    })  # fmt: skip
    return repo


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("services")
    yield root
    remove_built_images(root)


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine")
def test_a_suite_that_needs_four_services_gives_a_task_the_grader_resolves(work: Path):
    repo = build_kv(work / "kv")
    head = repo.git("rev-parse", "HEAD")
    profile = detect_profile(str(repo.path), head, "local/kv")
    assert profile.services == ("mariadb", "memcached", "postgres", "redis")
    assert "services started in the image: mariadb, memcached, postgres, redis" in profile.log

    params = write_params(work / "params.yaml", work / "cache", gold_runs=1)
    mined = run_cli("mine", "--repo", str(repo.path), "--output", "mine", "--params", str(params),
                    cwd=work)  # fmt: skip
    assert mined.returncode == 0, mined.stderr
    done = run_cli("validate", "--input", "mine", "--output", "val", "--params", str(params),
                   cwd=work)  # fmt: skip
    assert done.returncode == 0, done.stderr
    tasks = pl.read_parquet(work / "val" / "tasks" / "*.parquet").to_dicts()
    assert len(tasks) == 1, pl.read_parquet(work / "val" / "rejections" / "*.parquet").to_dicts()
    (task,) = tasks
    assert task["FAIL_TO_PASS"] == ["tests/test_kv.py::test_bump_adds_two"]
    # these pass only with both services up, in validate's runs and the grader's (gold_runs)
    assert sorted(task["PASS_TO_PASS"]) == [
        "tests/test_kv.py::test_mariadb_keeps_a_row", "tests/test_kv.py::test_memcached_answers",
        "tests/test_kv.py::test_postgres_keeps_a_row", "tests/test_kv.py::test_redis_answers",
    ]  # fmt: skip
    assert task["gold_runs"] == "1/1"
    profiles = pl.read_parquet(work / "val" / "profiles" / "*.parquet").to_dicts()
    assert [p["services"] for p in profiles] == [["mariadb", "memcached", "postgres", "redis"]]
    assert profiles[0]["service_hosts"] == ["cache", "db", "memcached", "mysql", "pg", "store"]

    # The grader, through evaluate: the fix resolves; a patch that fixes nothing does not, nor
    # one that asks Redis to plant code for it (PLANT).
    resolved = {}
    plant = source_patch("kv/__init__.py", KV.format(step=0), KV.format(step=0) + PLANT)
    for name, patch in (("gold", task["patch"]), ("nop", NOTHING_FIXED), ("plant", plant)):
        row = {"instance_id": task["instance_id"], "model_name_or_path": name, "model_patch": patch}
        (work / f"{name}.jsonl").write_text(json.dumps(row) + "\n")
        graded = run_cli("evaluate", "--tasks", "val", "--predictions", f"{name}.jsonl",
                         "--output", "eval", "--params", str(params), cwd=work)  # fmt: skip
        assert graded.returncode == 0, graded.stderr
        summary = json.loads((work / "eval" / f"{name}.evaluate.json").read_text())
        resolved[name] = summary["resolved_ids"] == [task["instance_id"]]
    assert resolved == {"gold": True, "nop": False, "plant": False}, resolved

    # Sealed: what a test may say to Redis names no path and loads no code, and a save lands
    # only in the service's own folder.
    # PostgreSQL's role writes no file, runs no program, reads no server file; its superuser
    # takes no connection; a restart (validate's reset) is the cluster as built.
    sandbox = DockerSandbox()
    try:
        with sandbox.session(SessionSpec(image=profiles[0]["image"], grading=True)) as session:
            said = session.exec(f"python - <<'EOF'\n{ATTEMPTS}EOF", timeout_s=60)
            saved = session.exec("ls /var/lib/trajforge-services", timeout_s=30)
            refused = {
                name: session.exec(f'psql -h 127.0.0.1 -U {user} -tAc "{sql}" postgres', 60)
                for name, user, sql in PG_ATTEMPTS
            }
            session.exec("trajforge-services true", timeout_s=120, workdir="/")
            after = session.exec(f'psql -U postgres -tAc "{PG_LEFT}" postgres', 60)
            outfile = session.exec(f'mariadb -h127.0.0.1 -uroot -prootpw -e "{MARIADB_OUT}"', 60)
    finally:
        sandbox.close()
    answers = [line[:20] for line in said.output.splitlines()]
    assert answers == ["-ERR unknown command"] * 3 + ["+OK"], said.output
    assert saved.output.split() == ["dump.rdb"], saved.output
    assert {name: run.exit_code for name, run in refused.items()} == {
        "program": 1, "file": 1, "read": 1, "superuser": 2, "table": 0,
    }, {name: run.output for name, run in refused.items()}  # fmt: skip
    assert "must be superuser" in refused["program"].output
    assert "pg_hba.conf rejects connection" in refused["superuser"].output
    assert after.output.split() == ["0"], after.output
    # MariaDB's root writes files only into the server's own folder
    assert outfile.exit_code == 1 and "--secure-file-priv" in outfile.output, outfile.output
