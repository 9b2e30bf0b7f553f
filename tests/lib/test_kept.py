"""portal.lib.kept: the bounded LRU behind kept report sections, run pages and share panels."""

from __future__ import annotations

import threading

from portal.lib.kept import Kept


def test_keeping_past_the_size_drops_the_least_recently_used():
    kept: Kept[str] = Kept(2)
    kept.put("a", "A")
    kept.put("b", "B")
    assert kept.get("a") == "A"  # now the most recent: b is the oldest
    kept.put("c", "C")
    assert (kept.get("a"), kept.get("b"), kept.get("c")) == ("A", None, "C")
    assert len(kept) == 2


def test_keeping_a_key_again_replaces_its_value_and_makes_it_recent():
    kept: Kept[int] = Kept(2)
    kept.put("a", 1)
    kept.put("b", 2)
    kept.put("a", 3)
    kept.put("c", 4)
    assert (kept.get("a"), kept.get("b"), kept.get("c")) == (3, None, 4)


def test_no_key_finds_nothing_and_clear_empties():
    kept: Kept[int] = Kept(4)
    kept.put("a", 1)
    assert kept.get(None) is None
    kept.clear()
    assert kept.get("a") is None and len(kept) == 0


def test_threads_keeping_and_reading_at_once_never_exceed_the_size():
    kept: Kept[int] = Kept(8)

    def work(offset: int) -> None:
        for i in range(2000):
            kept.put(f"{offset}-{i % 20}", i)
            kept.get(f"{offset}-{(i + 7) % 20}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(kept) == 8
