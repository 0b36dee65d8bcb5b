"""What a user installs: one `eventcraft` namespace, from a wheel or an sdist, beside their code.

These build the real distributions and install them in a fresh virtual
environment (its dependencies come from the package index, as a user's do),
so they run for tens of seconds: marked slow, and run by `make test` and CI.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("eventstore", "domain", "projections", "sagas", "messaging")

# A service laid out as domain-driven Python code usually is: its own `domain`
# and `sagas` packages beside the code that uses eventcraft's.
USER_DOMAIN = '''
"""The user's own domain package, which must win over nothing of ours."""
Aggregate = "the user's Aggregate"
'''

USER_SERVICE = """
import tempfile

import domain
import sagas
from eventcraft import __version__
from eventcraft.domain import Aggregate, DomainEvent, EventRegistry, Repository, State, evolves
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.projections import ProjectionRunner, Subscription
from eventcraft.sagas import Orchestrator, Saga, Step

assert domain.Aggregate == "the user's Aggregate" and sagas.MINE
events = EventRegistry()


@events.event("Opened")
class Opened(DomainEvent):
    owner: str


class AccountState(State):
    owner: str = ""

    @evolves
    def opened(self, event: Opened) -> "AccountState":
        return self.replace(owner=event.owner)


class Account(Aggregate[AccountState]):
    category = "account"
    registry = events

    def open(self, owner: str) -> None:
        self.record(Opened(owner=owner))


seen = []
with EventStore.open(f"sqlite:///{tempfile.mkdtemp()}/events.db") as store:
    accounts = Repository(store, Account)
    accounts.execute("a1", lambda account: account.open("ann"), create=True)
    store.append("parcel-1", [NewEvent("Sent", {})])
    with ProjectionRunner(store, [Subscription("seen", seen.append)]) as runner:
        runner.catch_up()
    checkout = Saga("checkout", [Step("ship", lambda data, context: {"shipped": True})])
    orchestrator = Orchestrator(store, [checkout])
    orchestrator.start(checkout, {}, saga_id="o1")
    orchestrator.run_pending()
    print(
        __version__,
        accounts.load("a1").state.owner,
        [event.type for event in seen],
        orchestrator.state("checkout", "o1").status,
    )
"""


def _run(*command: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(part) for part in command], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def distributions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, f"build failed:\n{built.stdout}\n{built.stderr}"
    # setuptools warns of folders it would leave out of the wheel (the console's pages
    # were, until listed): a warning here is a file missing for some user.
    assert "would be ignored" not in built.stdout + built.stderr, built.stdout + built.stderr
    (wheel,) = out.glob("eventcraft-*.whl")
    (sdist,) = out.glob("eventcraft-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


@pytest.mark.slow
def test_the_wheel_holds_only_the_eventcraft_namespace(distributions: dict[str, Path]) -> None:
    with zipfile.ZipFile(distributions["wheel"]) as wheel:
        names = wheel.namelist()
    tops = {name.split("/")[0] for name in names if not name.startswith("eventcraft-")}
    assert tops == {"eventcraft"}
    for package in PACKAGES:
        assert f"eventcraft/{package}/__init__.py" in names
        assert f"eventcraft/{package}/py.typed" in names
    assert "eventcraft/projections/spark/replay.py" in names
    assert "eventcraft/py.typed" in names
    # The console serves its pages and assets from the package, with no network.
    assert "eventcraft/console/templates/base.html" in names
    assert "eventcraft/console/static/console.css" in names
    assert "eventcraft/console/static/console.js" in names


@pytest.mark.slow
def test_the_sdist_builds_the_same_wheel(distributions: dict[str, Path], tmp_path: Path) -> None:
    with tarfile.open(distributions["sdist"]) as sdist:
        sdist.extractall(tmp_path, filter="data")
    (unpacked,) = tmp_path.iterdir()
    assert (unpacked / "LICENSE").is_file()
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp_path / "w", unpacked)
    (rebuilt,) = (tmp_path / "w").glob("*.whl")
    with zipfile.ZipFile(rebuilt) as a, zipfile.ZipFile(distributions["wheel"]) as b:
        assert sorted(a.namelist()) == sorted(b.namelist())


@pytest.mark.slow
def test_an_installed_wheel_works_beside_a_users_own_domain_package(
    distributions: dict[str, Path], tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    # pip installs into the new environment from here (--python): the environment's own
    # copy of pip, and the bytecode of every dependency compiled ahead, took most of the
    # CPU this test took; the service compiles what it imports.
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    install: list[str | Path] = ["install", "-q", "--no-compile", distributions["wheel"]]
    _run(sys.executable, "-m", "pip", "--python", python, *install)
    app = tmp_path / "app"
    for name, body in {"domain": USER_DOMAIN, "sagas": "MINE = True\n"}.items():
        (app / name).mkdir(parents=True)
        (app / name / "__init__.py").write_text(textwrap.dedent(body))
    (app / "service.py").write_text(USER_SERVICE)

    out = _run(python, "service.py", cwd=app)

    assert out.split("\n")[0] == "0.2.0 ann ['Opened', 'Sent'] completed"
    site = _run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip()
    installed = {path.name for path in Path(site).iterdir()}
    assert "eventcraft" in installed
    assert not installed & set(PACKAGES), "a top-level package of ours was installed"
    # The base install carries no extra: Spark says which one to install.
    refused = subprocess.run(
        [python, "-c", "import eventcraft.projections.spark"],
        cwd=app,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: eventcraft.projections.spark needs the spark extra: "
        "pip install 'eventcraft[spark]'"
    )
    # Messaging works without its extra but for the broker clients, which name it.
    brokers = subprocess.run(
        [
            python,
            "-c",
            "import eventcraft.messaging; from eventcraft.messaging import Relay\n"
            "from eventcraft.messaging import RabbitMQPublisher",
        ],
        cwd=app,
        capture_output=True,
        text=True,
    )
    assert brokers.returncode == 1
    assert (
        brokers.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "ImportError: RabbitMQPublisher needs the broker clients: "
            "pip install 'eventcraft[brokers]'"
        )
    )
