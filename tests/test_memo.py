"""Values kept by the object they were made from: made once per object, never for another object, bounded."""

from __future__ import annotations

from trajgrade.core.memo import ByObject


def test_a_value_is_made_once_per_object_and_never_shared_with_an_equal_one() -> None:
    made: list[object] = []

    def make(key: dict[str, int]) -> int:
        made.append(key)
        return len(made)

    kept = ByObject(make, 8)
    first, equal = {"a": 1}, {"a": 1}
    assert (kept(first), kept(first), kept(equal), kept(equal)) == (1, 1, 2, 2)
    assert made == [first, equal] and made[0] is first and made[1] is equal


def test_past_its_size_everything_is_forgotten() -> None:
    calls: list[int] = []
    keys = [object() for _ in range(3)]
    kept = ByObject(lambda key: calls.append(1) or len(calls), 2)
    assert [kept(k) for k in keys] == [1, 2, 3]  # the third cleared the first two
    assert kept(keys[2]) == 3 and kept(keys[0]) == 4
