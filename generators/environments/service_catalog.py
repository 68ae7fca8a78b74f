"""The services trajforge starts in an environment image, each with how it is installed, set up
at build, started and reached (``services.py`` picks them from a project's files and renders
them into the image).

Each one is started so that nothing code under test tells it can name a path or load code
(``services.py`` and docs/security.md say why each holds): Redis with ``CONFIG``, ``DEBUG``
and ``MODULE`` renamed away; PostgreSQL and MariaDB as their own OS users, who own nothing
outside their own folders, with a superuser nobody may connect as (PostgreSQL) or file writes
only into the server's folder (MariaDB). A start of either is a fresh copy of the database
built with the image, so a reset forgets what a run wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

DATA_DIR = "/var/lib/trajforge-services"


@dataclass(frozen=True)
class Service:
    """One service: the container images that mean it, its Debian packages, how it starts on
    loopback in the background (started again, it starts afresh), and the port that answers
    once it is ready."""

    name: str
    images: tuple[str, ...]
    packages: tuple[str, ...]
    start: str
    port: int
    actions: tuple[str, ...] = ()  # GitHub Actions a workflow's step starts it with (``uses:``)
    build_steps: tuple[str, ...] = ()  # at build, as root, after its packages: what it starts from
    user: str = ""  # the OS user it runs as, switched to by ``start`` ("": root)


# PostgreSQL: the cluster initialized at build (root's, read-only), copied fresh by each start.
PG_BIN = "/usr/local/lib/trajforge-postgres"  # the newest installed major's bin/
PG_CLUSTER = "/usr/local/share/trajforge-postgres"
PG_HOME = "/var/lib/trajforge-postgres"  # the postgres user's: the running copy and its log
PG_ADMIN = "trajforge_admin"  # the bootstrap superuser: every connection as it is rejected
AS_POSTGRES = "setpriv --reuid=postgres --regid=postgres --init-groups"
PG_HBA = (
    f"local all {PG_ADMIN} reject",
    f"host all {PG_ADMIN} all reject",
    "local all all trust",
    "host all all 127.0.0.1/32 trust",
    "host all all ::1/128 trust",
)
PG_SETTINGS = (
    "-c listen_addresses=127.0.0.1 -c port=5432 -c fsync=off -c synchronous_commit=off "
    "-c full_page_writes=off"
)
POSTGRES_BUILD = (
    "rm -rf /var/lib/postgresql/[0-9]* /etc/postgresql/[0-9]*",  # the package's own cluster
    f'ln -sfn "$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)" {PG_BIN}',
    f"install -d -o postgres -g postgres -m 700 {PG_HOME}",
    "install -d -o postgres -g postgres -m 2775 /var/run/postgresql",
    f"{AS_POSTGRES} {PG_BIN}/initdb -D {PG_HOME}/data -U {PG_ADMIN} -A trust -E UTF8 --locale=C "
    "--no-sync >/dev/null",
    # single-user mode runs as the bootstrap superuser: the suite's roles, owners of their
    # databases (POSTGRES_USER and POSTGRES_DB as the image's ENV: identifiers, service_env.py)
    'u="${POSTGRES_USER:-postgres}"; d="${POSTGRES_DB:-$u}"',
    "{ echo 'CREATE ROLE postgres LOGIN CREATEDB;'; echo 'ALTER DATABASE postgres OWNER TO "
    'postgres;\'; [ "$u" = postgres ] || echo "CREATE ROLE \\"$u\\" LOGIN CREATEDB;"; '
    '[ "$d" = postgres ] || echo "CREATE DATABASE \\"$d\\" OWNER \\"$u\\";"; } '
    f"| {AS_POSTGRES} {PG_BIN}/postgres --single -D {PG_HOME}/data postgres >/dev/null",
    "printf '%s\\n' " + " ".join(f"'{line}'" for line in PG_HBA) + f" > {PG_HOME}/data/pg_hba.conf",
    f"mv {PG_HOME}/data {PG_CLUSTER}",
    f"chown -R root:root {PG_CLUSTER}",
    f"chmod -R a+rX,go-w {PG_CLUSTER}",
)
# A start is a fresh server: the running one (a reset's, whose files root may not touch) killed
# by its own user, its port closed, then a new copy of the cluster.
POSTGRES_START = (
    f"{{ {AS_POSTGRES} /bin/sh -c 'kill -9 -1' 2>/dev/null; "
    "for _ in $(seq 100); do (: >/dev/tcp/127.0.0.1/5432) 2>/dev/null || break; sleep 0.1; done; "
    f"{AS_POSTGRES} /bin/sh -ec 'rm -rf {PG_HOME}/data; cp -R {PG_CLUSTER} {PG_HOME}/data; "
    f"chmod 700 {PG_HOME}/data; exec {PG_BIN}/pg_ctl -D {PG_HOME}/data -l {PG_HOME}/server.log "
    f'-w -t 60 -o "{PG_SETTINGS}" start\'; }}'
)


# MariaDB for a suite that expects MySQL or MariaDB: the same shape as PostgreSQL's. Its
# accounts are the official images' (``MYSQL_*`` or ``MARIADB_*`` settings as the image's ENV:
# root's password, a database, a user with every right on it); files its SQL writes
# (``INTO OUTFILE``) land only in its own folder (``secure_file_priv``).
MARIADB_CLUSTER = "/usr/local/share/trajforge-mariadb"
MARIADB_HOME = "/var/lib/trajforge-mariadb"  # the mysql user's: the running copy, files, log
AS_MYSQL = "setpriv --reuid=mysql --regid=mysql --init-groups"
MARIADB_SETTINGS = (
    f"--datadir={MARIADB_HOME}/data --innodb-log-file-size=8M --innodb-buffer-pool-size=64M"
)
MARIADB_BUILD = (
    "rm -rf /var/lib/mysql/*",  # the package's own data
    "install -d -o mysql -g mysql -m 755 /run/mysqld",
    f"install -d -o mysql -g mysql -m 700 {MARIADB_HOME}",
    f"mariadb-install-db --no-defaults --user=mysql {MARIADB_SETTINGS} "
    "--auth-root-authentication-method=normal --skip-test-db >/dev/null",
    'r="${MARIADB_ROOT_PASSWORD:-${MYSQL_ROOT_PASSWORD:-}}"; '
    'db="${MARIADB_DATABASE:-${MYSQL_DATABASE:-}}"; u="${MARIADB_USER:-${MYSQL_USER:-}}"; '
    'p="${MARIADB_PASSWORD:-${MYSQL_PASSWORD:-}}"',
    # bootstrap mode: one statement a line, privileges loaded first
    "{ echo 'FLUSH PRIVILEGES;'; for h in localhost 127.0.0.1 ::1; do "
    "echo \"CREATE USER IF NOT EXISTS 'root'@'$h';\"; "
    "echo \"GRANT ALL ON *.* TO 'root'@'$h' WITH GRANT OPTION;\"; "
    "echo \"ALTER USER 'root'@'$h' IDENTIFIED BY '$r';\"; done; "
    '[ -z "$db" ] || echo "CREATE DATABASE \\`$db\\`;"; '
    "[ -z \"$u\" ] || echo \"CREATE USER '$u'@'%' IDENTIFIED BY '$p';\"; "
    '[ -z "$u" ] || [ -z "$db" ] || echo "GRANT ALL ON \\`$db\\`.* TO \'$u\'@\'%\';"; } '
    f"| {AS_MYSQL} /usr/sbin/mariadbd --no-defaults --bootstrap {MARIADB_SETTINGS} "
    f"--log-error={MARIADB_HOME}/bootstrap.log >/dev/null",
    f"mv {MARIADB_HOME}/data {MARIADB_CLUSTER}",
    f"chown -R root:root {MARIADB_CLUSTER}",
    f"chmod -R a+rX,go-w {MARIADB_CLUSTER}",
)
MARIADB_START = (
    f"{{ {AS_MYSQL} /bin/sh -c 'kill -9 -1' 2>/dev/null; "
    "for _ in $(seq 100); do (: >/dev/tcp/127.0.0.1/3306) 2>/dev/null || break; sleep 0.1; done; "
    f"{AS_MYSQL} /bin/sh -ec 'rm -rf {MARIADB_HOME}/data; cp -R {MARIADB_CLUSTER} "
    f"{MARIADB_HOME}/data; chmod 700 {MARIADB_HOME}/data; mkdir -p {MARIADB_HOME}/files; "
    f"/usr/sbin/mariadbd --no-defaults {MARIADB_SETTINGS} --socket=/run/mysqld/mysqld.sock "
    "--bind-address=127.0.0.1 --port=3306 --skip-name-resolve --skip-log-bin "
    f"--secure-file-priv={MARIADB_HOME}/files --log-error={MARIADB_HOME}/server.log "
    f"--pid-file={MARIADB_HOME}/mariadbd.pid --innodb-flush-log-at-trx-commit=0 "
    ">/dev/null 2>&1 &'; }"
)
SERVICES: dict[str, Service] = {
    service.name: service
    for service in (
        Service(
            "redis",
            ("redis", "redis-stack", "redis-stack-server", "valkey"),
            ("redis-server",),
            f"redis-server --bind 127.0.0.1 --port 6379 --daemonize yes --dir {DATA_DIR} "
            "--save '' --appendonly no --rename-command CONFIG '' --rename-command DEBUG '' "
            "--rename-command MODULE '' --logfile ''",
            6379,
            ("supercharge/redis-github-action", "shogo82148/actions-setup-redis"),
        ),
        Service(
            "memcached",
            ("memcached",),
            ("memcached",),
            "memcached -u root -l 127.0.0.1 -p 11211 -d",
            11211,
            ("niden/actions-memcached",),
        ),
        Service(
            "postgres",
            ("postgres", "postgresql"),
            ("postgresql",),
            POSTGRES_START,
            5432,
            ("harmon758/postgresql-action", "ikalnytskyi/action-setup-postgres"),
            POSTGRES_BUILD,
            "postgres",
        ),
        Service(
            "mariadb",
            ("mysql", "mariadb", "percona", "percona-server"),
            ("mariadb-server",),
            MARIADB_START,
            3306,
            (
                "ankane/setup-mysql",
                "ankane/setup-mariadb",
                "shogo82148/actions-setup-mysql",
                "mirromutth/mysql-action",
                "getong/mariadb-action",
            ),
            MARIADB_BUILD,
            "mysql",
        ),
    )
}
# Named by projects, never started here: why, in one line.
NOT_STARTED: dict[str, str] = {
    "postgis": "PostGIS is not started (Debian's PostgreSQL has no PostGIS of the image's version)",
}
