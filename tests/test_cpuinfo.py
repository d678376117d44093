"""common/cpuinfo.py: /proc/cpuinfo's lines by label, as the kernel build and environment.json read them."""

from __future__ import annotations

from agentcredit.common.cpuinfo import cpu_flags, cpuinfo_value

X86 = "processor\t: 0\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu avx2 fma\nbugs\t\t: sysret_ss_attrs\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd crc32\nCPU implementer\t: 0x41\n"


def test_the_first_line_with_a_label_gives_its_value(tmp_path):
    (tmp_path / "cpuinfo").write_text(X86 + "processor\t: 1\nmodel name\t: another\n")
    assert cpuinfo_value(("model name",), tmp_path / "cpuinfo") == "AMD EPYC 9R14"


def test_flags_on_x86_and_features_on_arm(tmp_path):
    (tmp_path / "x86").write_text(X86)
    (tmp_path / "arm").write_text(ARM)
    assert cpu_flags(tmp_path / "x86") == {"fpu", "avx2", "fma"}
    assert cpu_flags(tmp_path / "arm") == {"fp", "asimd", "crc32"}


def test_a_missing_label_or_file_gives_nothing(tmp_path):
    (tmp_path / "arm").write_text(ARM)
    assert cpuinfo_value(("model name",), tmp_path / "arm") is None
    assert cpuinfo_value(("flags",), tmp_path / "missing") is None
    assert cpu_flags(tmp_path / "missing") == set()
