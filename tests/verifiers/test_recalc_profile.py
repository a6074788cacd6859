"""The LibreOffice profile used to recalculate agent workbooks sets every risky default explicitly.

LibreOffice's defaults differ by version and install (Calc's link updating is
"on request"); the scorer opens workbooks the agent wrote, so the profile
itself must say: never update links, never run macros.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import openpyxl
import pytest

from analyst_env.verifiers import recalc

OOR = "{http://openoffice.org/2001/registry}"


def profile_settings() -> dict[tuple[str, str], str]:
    root = ET.fromstring(recalc._PROFILE_XCU)
    return {
        (item.get(f"{OOR}path"), prop.get(f"{OOR}name")): prop.find("value").text
        for item in root
        for prop in item
    }


def test_links_are_never_updated_and_macros_never_run():
    settings = profile_settings()
    assert settings[("/org.openoffice.Office.Calc/Content/Update", "Link")] == "1"  # LM_NEVER
    assert settings[("/org.openoffice.Office.Writer/Content/Update", "Link")] == "0"  # NEVER
    assert (
        settings[("/org.openoffice.Office.Common/Security/Scripting", "DisableMacrosExecution")]
        == "true"
    )
    assert (
        settings[("/org.openoffice.Office.Common/Security/Scripting", "MacroSecurityLevel")] == "3"
    )
    assert settings[("/org.openoffice.Office.Calc/Formula/Load", "OOXMLRecalcMode")] == "0"


@pytest.mark.skipif(recalc.soffice_path() is None, reason="LibreOffice is not installed")
def test_libreoffice_still_recalculates_with_this_profile():
    wb = openpyxl.Workbook()
    wb.active["A1"], wb.active["A2"], wb.active["A3"] = 2, 3, "=A1*A2"
    buf = io.BytesIO()
    wb.save(buf)
    out = openpyxl.load_workbook(
        io.BytesIO(recalc.recalculate_bytes(buf.getvalue())), data_only=True
    )
    assert out.active["A3"].value == 6
