"""Helpers defined inside every episode's kernel, for the tools that are not plain cells.

``run_sql`` and ``list_files`` run *inside* the sandbox, so they see exactly the
files the agent sees (including files the agent wrote) on any backend. The
environment sends ``HELPER_SOURCE`` once per episode as a silent cell; the tools
then call the two functions silently and read one JSON line from stdout.

SQL engine: SQLite when the working directory holds a SQLite database (the
first one is ``main``; others are attached under their file stem), so SQLite
tasks keep SQLite semantics. Otherwise DuckDB with one view per CSV file and
one table per Excel sheet, named after the file stem (and ``stem_sheet`` for
workbooks with several sheets).
"""

HELPER_SOURCE = r'''
def __analyst_define_helpers__():
    import json as _json, os as _os, re as _re, sqlite3 as _sqlite3

    _SQLITE_EXT = (".sqlite", ".sqlite3", ".db")
    _CSV_EXT = (".csv", ".tsv")
    _EXCEL_EXT = (".xlsx", ".xlsm")

    def _ident(text):
        name = _re.sub(r"\W+", "_", text).strip("_").lower() or "t"
        return "t_" + name if name[0].isdigit() else name

    def _data_files():
        found = []
        for root, dirs, files in _os.walk("."):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "logs")
            for f in sorted(files):
                found.append(_os.path.normpath(_os.path.join(root, f)))
        return found

    def _cell(v):
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, bytes):
            return "<%d bytes>" % len(v)
        return str(v)

    def _run_sqlite(query, dbs, max_rows):
        con = _sqlite3.connect(dbs[0])
        try:
            for extra in dbs[1:]:
                stem = _os.path.splitext(_os.path.basename(extra))[0]
                con.execute("ATTACH DATABASE ? AS " + _ident(stem), (extra,))
            cur = con.execute(query)
            cols = [d[0] for d in cur.description] if cur.description else []
            rows = cur.fetchmany(max_rows + 1) if cols else []
            con.commit()
        finally:
            con.close()
        return cols, rows

    _duck = {"signature": None, "con": None}

    def _duckdb_connection(files):
        """One DuckDB connection per file set: connecting costs tens of ms, a query far less."""
        import duckdb
        tables = [f for f in files if f.lower().endswith(_CSV_EXT + _EXCEL_EXT)]
        signature = tuple((f, _os.stat(f).st_mtime_ns, _os.stat(f).st_size) for f in tables)
        if _duck["con"] is not None and _duck["signature"] == signature:
            return _duck["con"]
        if _duck["con"] is not None:
            _duck["con"].close()
            _duck["con"] = None
        con = duckdb.connect(":memory:")
        for f in tables:
            stem, ext = _os.path.splitext(_os.path.basename(f))
            if ext.lower() in _CSV_EXT:
                path = f.replace("'", "''")
                view = "CREATE VIEW %s AS SELECT * FROM read_csv_auto('%s')"
                con.execute(view % (_ident(stem), path))
            else:
                import pandas as pd
                sheets = pd.read_excel(f, sheet_name=None)
                for sheet, df in sheets.items():
                    name = _ident(stem if len(sheets) == 1 else stem + "_" + str(sheet))
                    con.register("__df_" + name, df)
                    con.execute("CREATE TABLE %s AS SELECT * FROM __df_%s" % (name, name))
                    con.unregister("__df_" + name)
        _duck.update(signature=signature, con=con)
        return con

    def _run_duckdb(query, files, max_rows):
        cur = _duckdb_connection(files).cursor()
        try:
            cur.execute(query)
            cols = [d[0] for d in cur.description] if cur.description else []
            rows = cur.fetchmany(max_rows + 1) if cols else []
        finally:
            cur.close()
        return cols, rows

    def sql(query, max_rows=50):
        files = _data_files()
        dbs = [f for f in files if f.lower().endswith(_SQLITE_EXT)]
        try:
            if dbs:
                engine = "sqlite"
                cols, rows = _run_sqlite(query, dbs, max_rows)
            else:
                engine = "duckdb"
                cols, rows = _run_duckdb(query, files, max_rows)
        except Exception as exc:
            print(_json.dumps({"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}))
            return
        truncated = len(rows) > max_rows
        rows = [[_cell(v) for v in r] for r in rows[:max_rows]]
        result = {"ok": True, "engine": engine, "columns": cols, "rows": rows}
        result["truncated"] = truncated
        print(_json.dumps(result))

    def list_files():
        out = []
        for f in _data_files():
            try:
                out.append({"name": f, "size_bytes": _os.path.getsize(f)})
            except OSError:
                pass
        print(_json.dumps({"ok": True, "files": out}))

    return sql, list_files

__analyst_sql__, __analyst_list_files__ = __analyst_define_helpers__()
del __analyst_define_helpers__
'''


def sql_call(query: str, max_rows: int) -> str:
    """Source of the silent cell that runs ``query`` through the kernel helper."""
    return f"__analyst_sql__({query!r}, {int(max_rows)})"


LIST_FILES_CALL = "__analyst_list_files__()"
