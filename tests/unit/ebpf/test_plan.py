from __future__ import annotations

import pytest

from ebpf.plan import (MAX_CLASSES, MIN_RATE_BPS, HtbClass, Plan, PortRule, build_plan, class_handle, format_handle,
                       plan_from_dict, plan_to_dict, tenant_port_rules)
from services.common.qos import DEFAULT_CLASSES, QosClass

GBIT = 10**9


def test_default_classes_become_htb_classes_with_shares_and_priorities() -> None:
    plan = build_plan(DEFAULT_CLASSES, GBIT)
    assert [(c.name, format_handle(c.handle), c.rate_bps, c.ceil_bps, c.prio) for c in plan.classes] == [
        ("realtime", "1:10", 600_000_000, GBIT, 0), ("standard", "1:20", 300_000_000, GBIT, 1),
        ("bulk", "1:30", 100_000_000, GBIT, 2)]
    assert plan.default_class.name == "bulk"
    assert plan.dscp_slots() == {46: 1, 26: 2, 10: 3}
    assert plan.slot_names() == {0: "unclassified", 1: "realtime", 2: "standard", 3: "bulk"}


def test_skb_priority_is_the_full_htb_handle() -> None:
    assert class_handle(1) == 0x10010 and class_handle(2) == 0x10020
    assert format_handle(0x10010) == "1:10" and format_handle(0x100A0) == "1:a0"
    with pytest.raises(ValueError, match="slot"):
        class_handle(0)


def test_zero_share_still_gets_a_positive_rate_and_priorities_cap_at_7() -> None:
    classes = [QosClass(f"c{i}", i, 0) for i in range(10)]
    assert all(c.rate_bps == MIN_RATE_BPS for c in build_plan(classes, 2_000_000).classes)
    plan = build_plan(classes, 20_000_000)
    assert all(c.rate_bps == 20_000_000 // 1000 for c in plan.classes)  # or a thousandth of a fast link
    assert [c.prio for c in plan.classes] == [0, 1, 2, 3, 4, 5, 6, 7, 7, 7]


def test_port_rules_map_ports_to_slots_with_labels() -> None:
    rules = tenant_port_rules({"acme": 9000}, {"acme": "realtime", "globex": "bulk"})
    plan = build_plan(DEFAULT_CLASSES, GBIT, port_rules=[*rules, PortRule(8111, "standard")])
    assert plan.port_slots() == {9000: 1, 8111: 2}
    assert [r.label for r in plan.port_rules] == ["acme", "port:8111"]


@pytest.mark.parametrize("kwargs, field", [
    ({"port_rules": [PortRule(9000, "gold")]}, "port_rules"),
    ({"port_rules": [PortRule(9000, "bulk"), PortRule(9000, "realtime")]}, "port_rules"),
    ({"leaf_limit": 0}, "leaf_limit"),
])
def test_bad_plans_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        build_plan(DEFAULT_CLASSES, GBIT, **kwargs)  # type: ignore[arg-type]


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="total_bps"):
        build_plan(DEFAULT_CLASSES, 0)
    with pytest.raises(ValueError, match=f"at most {MAX_CLASSES}"):
        build_plan([QosClass(f"c{i}", i, 0) for i in range(MAX_CLASSES + 1)], GBIT)
    with pytest.raises(ValueError, match="port"):
        PortRule(0, "bulk")
    with pytest.raises(ValueError, match="rate_bps"):
        HtbClass("x", 1, 0, rate_bps=2, ceil_bps=1, prio=0)
    with pytest.raises(ValueError, match="unknown tenant"):
        tenant_port_rules({"initech": 1}, {"acme": "realtime"})
    with pytest.raises(ValueError, match="unknown QoS class"):
        build_plan(DEFAULT_CLASSES, GBIT).slot_of("gold")


def test_plan_round_trips_through_json_form() -> None:
    plan = build_plan(DEFAULT_CLASSES, GBIT, port_rules=[PortRule(9000, "realtime", "acme")], leaf_limit=50)
    again = plan_from_dict(plan_to_dict(plan))
    assert again == plan and isinstance(again, Plan)
