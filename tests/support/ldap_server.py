"""A real LDAP directory on this machine (Debian's slapd) for the sign-in tests: its own config,
database and port in a temporary folder, the lab's people and groups loaded with slapadd.

People: dora (in the groups vision and admins), eve (in vision-readers). Their passwords are
`<name>-password`.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.waiting import wait_until
from workbench.embedded_redis import free_port

SUFFIX = "dc=lab,dc=example"
PEOPLE = f"ou=people,{SUFFIX}"
GROUPS = f"ou=groups,{SUFFIX}"
SLAPD = shutil.which("slapd") or "/usr/sbin/slapd"
SLAPADD = shutil.which("slapadd") or "/usr/sbin/slapadd"

CONFIG = """include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile {folder}/slapd.pid
database mdb
maxsize 10485760
suffix "{suffix}"
rootdn "cn=admin,{suffix}"
rootpw not-used-by-the-tests
directory {folder}/db
access to attrs=userPassword by self read by anonymous auth by * none
access to * by users read by * none
"""


def _person(uid: str, name: str) -> str:
    return (f"dn: uid={uid},{PEOPLE}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {name}\n"
            f"sn: {name.split()[-1]}\ngivenName: {name.split()[0]}\nmail: {uid}@lab.example\n"
            f"userPassword: {uid}-password\n")  # fmt: skip


def _group(cn: str, *members: str) -> str:
    lines = "".join(f"member: uid={uid},{PEOPLE}\n" for uid in members)
    return f"dn: cn={cn},{GROUPS}\nobjectClass: groupOfNames\ncn: {cn}\n{lines}"


DATA = "\n".join([
    f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\no: Lab\ndc: lab\n",
    f"dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people\n",
    f"dn: {GROUPS}\nobjectClass: organizationalUnit\nou: groups\n",
    _person("dora", "Dora Explorer"),
    _person("eve", "Eve Reader"),
    _group("vision", "dora"),
    _group("admins", "dora"),
    _group("vision-readers", "eve"),
])  # fmt: skip


@dataclass
class Directory:
    url: str
    folder: Path

    def group(self, cn: str) -> str:
        return f"cn={cn},{GROUPS}"


@contextmanager
def ldap_directory() -> Iterator[Directory]:
    folder = Path(tempfile.mkdtemp(prefix="workbench-ldap-"))
    (folder / "db").mkdir()
    config = folder / "slapd.conf"
    config.write_text(CONFIG.format(folder=folder, suffix=SUFFIX))
    (folder / "data.ldif").write_text(DATA)
    subprocess.run([SLAPADD, "-f", str(config), "-l", str(folder / "data.ldif")], check=True, capture_output=True)
    port = free_port()
    url = f"ldap://127.0.0.1:{port}"
    process = subprocess.Popen([SLAPD, "-f", str(config), "-h", f"{url}/", "-d", "0"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_until(lambda: _answers(port), what="slapd to listen", timeout=20)
        yield Directory(url=url, folder=folder)
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def _answers(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0
