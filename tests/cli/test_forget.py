"""`eventcraft forget SUBJECT`: asks first, erases the key, and every command that reads
the log then shows the replacement; the operations it calls, on every backend."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import orjson
from eventcraft.eventstore import FORGOTTEN, EventStore, KeyStore, NewEvent, Personal
from pydantic import BaseModel

from eventcraft.operations import personal as operations

from .conftest import Run


class Registered(BaseModel):
    name: Annotated[str, Personal()]


def _registered(store: EventStore) -> None:
    store.append("customer-ada", [NewEvent("Registered", Registered(name="Ada Lovelace"))])
    store.append("customer-bob", [NewEvent("Registered", Registered(name="Bob Dylan"))])


def test_the_operations_count_the_keys_then_erase_them(store: EventStore) -> None:
    _registered(store)
    keys = store.keys
    assert operations.subject_keys(keys, "customer-ada").live == 1
    done = operations.forget(keys, "customer-ada")
    assert (done.erased, done.replacement) == (1, FORGOTTEN)
    found = operations.subject_keys(keys, "customer-ada")
    assert (found.live, found.forgotten) == (0, 1)
    assert operations.forget(keys, "customer-ada").erased == 0  # re-checked: nothing left
    assert operations.subject_keys(keys, "nobody").live == 0


def test_forget_asks_then_erases_and_the_log_shows_the_replacement(
    shared_store_url: str, run: Run
) -> None:
    with EventStore.open(shared_store_url) as store:
        _registered(store)
    store_option = ("--store", shared_store_url)
    asked = run(*store_option, "forget", "customer-ada")
    assert asked.code == 2 and "pass --yes" in asked.err
    shown = run(*store_option, "show", "customer-ada", "--json")
    assert orjson.loads(shown.out.splitlines()[0])["data"] == {"name": "Ada Lovelace"}

    done = run(*store_option, "forget", "customer-ada", "--yes", "--json")
    assert done.code == 0, done.err
    assert orjson.loads(done.out)["erased"] == 1
    for command in (("show", "customer-ada", "--json"), ("log", "--json")):
        out = run(*store_option, *command).out
        assert "Ada Lovelace" not in out and "$personal" not in out
        assert FORGOTTEN in out
    assert "Bob Dylan" in run(*store_option, "log", "--json").out
    exported = run(*store_option, "export", "--out", "-")
    assert exported.code == 0, exported.err
    assert "Ada Lovelace" not in exported.out and "$personal" not in exported.out
    assert FORGOTTEN in exported.out and "Bob Dylan" in exported.out

    again = run(*store_option, "forget", "customer-ada")  # nothing to erase: nothing to ask
    assert again.code == 0 and "no key to erase" in again.out


def test_forget_takes_a_key_store_of_its_own(tmp_path: Path, run: Run) -> None:
    store_url, keys_url = f"sqlite:///{tmp_path / 'events.db'}", f"sqlite:///{tmp_path / 'k.db'}"
    with EventStore.open(store_url, keys=keys_url) as store:
        _registered(store)
    done = run("--store", store_url, "forget", "customer-ada", "--keys", keys_url, "--yes")
    assert done.code == 0, done.err
    with KeyStore.open(keys_url) as keys:
        assert [key.material for key in keys.of_subject("customer-ada")] == [None]


def test_forget_names_the_key_store_when_it_holds_no_keys_at_all(tmp_path: Path, run: Run) -> None:
    store_url, keys_url = f"sqlite:///{tmp_path / 'events.db'}", f"sqlite:///{tmp_path / 'k.db'}"
    with EventStore.open(store_url, keys=keys_url) as store:
        _registered(store)
    done = run("--store", store_url, "forget", "customer-ada", "--yes")  # no --keys
    assert done.code == 0, done.err
    assert "holds no keys at all" in done.out and "--keys URL" in done.out
    assert store_url in done.out.replace("\n", "")
    assert "nothing was sealed for it" not in done.out
    as_json = run("--store", store_url, "forget", "customer-ada", "--yes", "--json")
    assert as_json.code == 0 and orjson.loads(as_json.out)["key_store_empty"] is True


def test_forget_refuses_a_key_store_file_that_is_not_there_and_makes_none(
    tmp_path: Path, run: Run
) -> None:
    store_url, keys_url = f"sqlite:///{tmp_path / 'events.db'}", f"sqlite:///{tmp_path / 'k.db'}"
    with EventStore.open(store_url, keys=keys_url) as store:
        _registered(store)
    typo = tmp_path / "typo" / "kyes.db"
    done = run("--store", store_url, "forget", "customer-ada", "--keys", f"sqlite:///{typo}")
    assert done.code == 2 and str(typo) in done.err
    assert not typo.parent.exists()
    with KeyStore.open(keys_url) as keys:
        assert [key.material is not None for key in keys.of_subject("customer-ada")] == [True]


def test_reads_of_a_sqlite_key_store_that_is_not_there_make_no_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "keys.db"
    with KeyStore.open(f"sqlite:///{path}") as keys:
        assert keys.of_subject("customer-ada") == []
        assert not keys.holds_keys() and keys.forget("customer-ada") == 0
        assert keys.opening(["a-key"]) == {}
    assert not path.parent.exists()
