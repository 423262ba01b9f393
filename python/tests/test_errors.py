"""Bad input raises a Python exception carrying the C library's message,
never a crash."""

import numpy as np
import pytest

import placer


@pytest.fixture(scope="module")
def session(data_copy):
    return placer.Session(db=data_copy("h200x2.db"))


def test_wrong_length(session):
    with pytest.raises(placer.InputError, match="placement has 5 entries but the graph needs 40") as e:
        session.simulate(np.zeros((3, 5), dtype=np.int32))
    assert e.value.status_name and isinstance(e.value, ValueError)
    with pytest.raises(placer.InputError, match="5 entries"):
        session.evaluate([0] * 5)
    with pytest.raises(placer.InputError, match="entries"):
        session.evaluate([0] * 41)
    with pytest.raises(placer.InputError, match="entries"):
        session.evaluate(np.zeros(100, dtype=np.int32))


def test_device_out_of_range(session):
    rows = np.zeros((4, 40), dtype=np.int32)
    rows[2, 7] = 2
    with pytest.raises(placer.InputError, match="row 2: placement entry 8 is device 2 but only devices 0..1 exist"):
        session.simulate(rows)
    with pytest.raises(placer.InputError, match="is device -1 but only devices 0..1 exist"):
        session.evaluate([0] * 12 + [-1])
    with pytest.raises(placer.InputError, match="only devices 0..1"):
        session.simulate(np.full((1, 13), 2**40))
    with pytest.raises(placer.InputError, match="integers"):
        session.simulate(np.full((1, 13), 0.5))


def test_missing_and_damaged_database(tmp_path):
    missing = tmp_path / "nope.db"
    with pytest.raises(placer.NotFoundError, match="nope.db") as e:
        placer.Session(db=missing)
    assert isinstance(e.value, FileNotFoundError)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(placer.PlacerError, match="junk.db"):
        placer.Session(db=junk)
    with pytest.raises(placer.NotFoundError, match="nope.db"):
        placer.runs(missing)
    with pytest.raises(placer.NotFoundError, match="nope.db"):
        placer.PlacementEnv(db=missing)


def test_bad_options(data_copy):
    db = data_copy("h200x2.db")
    with pytest.raises(placer.InputError, match="divide"):
        placer.Session(db=db, micro_batches=3)
    with pytest.raises(placer.InputError, match="gpipe"):
        placer.Session(db=db, schedule="zigzag")
    with pytest.raises(placer.InputError, match="colocate"):
        placer.Session(db=db, groups="clusters")
    with pytest.raises(placer.PlacerError, match="preset|config"):
        placer.Session(db=db, config="nosuchmodel")
    with pytest.raises(placer.InputError, match="exactly one"):
        placer.Session()
    with pytest.raises(placer.NotFoundError, match="known"):
        placer.Session(spec="no-such-machine")
    with pytest.raises(placer.PlacerError):
        placer.Session(db=db, mem_cap="lots")
    s = placer.Session(db=db)
    with pytest.raises(placer.InputError, match="unknown search method"):
        s.search("genetic")
    with pytest.raises(placer.NotFoundError, match="run 999"):
        placer.run_samples(db, 999)
    with pytest.raises(TypeError):
        s.evaluate("0,1")


def test_unopened_session_raises_instead_of_crashing():
    raw = placer._core.Session.__new__(placer._core.Session)
    with pytest.raises(RuntimeError, match="not open"):
        raw.evaluate([0] * 13)
    with pytest.raises(RuntimeError, match="not open"):
        raw.search("single")
