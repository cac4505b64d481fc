"""Writes cases/types.json (the data types and date/time function cases): edit here, then run
`python3 test/spark-diff/types_cases.py`. Expressions use the case format (case-format.ts); `py`
is a plain argument PySpark takes as a Python value (a pattern, a unit)."""
import json
def col(n): return {"col": n}
def lit(v): return {"lit": v}
def py(v): return {"py": v}
def fn(name, *args, **kw): d = {"fn": name, "args": list(args)}; d.update(kw); return d
def a(e, name): return {"expr": e, "as": name}
def inp(*fields): return [{"name": "in", "kind": "stream", "schema": [{"name": n, "type": t} for n, t in fields]}]
def case(id, inputs, query, steps, mode="append", notes=None):
    c = {"id": "types/" + id, "shape": "types", "inputs": inputs, "query": [{"op": "source", "input": "in"}] + query, "outputMode": mode, "steps": [{"in": s} for s in steps]}
    if notes: c["notes"] = notes
    return c

cases = []
dt_in = inp(("s", "string"), ("t", "timestamp"), ("d", "date"))
# 2024-01-02 03:04:05.123456 = 1704164645.123456 ; 1969-12-31 23:59:59 = -1 ; 2024-02-29 15:30 = 1709220600
dt_rows = [["2024-01-02", 1704164645.123456, "2024-01-31"], ["2024-02-29 15:30:00", 1709220600, "2024-02-29"],
           ["1969-12-31 23:59:59", -1, "1969-12-31"], [None, None, None], ["2021-01-03", 1609632000, "2021-01-03"]]
cases.append(case("datetime-fields", dt_in, [{"op": "select", "exprs": [
    a(fn("to_date", col("s")), "to_date"), a(fn("to_timestamp", col("s")), "to_ts"),
    a(fn("date_format", col("t"), py("yyyy-MM-dd HH:mm:ss.SSS EEE EEEE MMM MMMM a hh h k K D Q")), "fmt"),
    a(fn("date_format", col("d"), py("dd/MM/yy 'day' E")), "fmt_d"),
    a(fn("date_trunc", py("hour"), col("t")), "tr_hour"), a(fn("date_trunc", py("week"), col("t")), "tr_week"),
    a(fn("date_trunc", py("quarter"), col("t")), "tr_q"), a(fn("date_trunc", py("MM"), col("t")), "tr_mm"),
    a(fn("date_trunc", py("second"), col("t")), "tr_s"), a(fn("trunc", col("d"), py("year")), "trunc_y"),
    a(fn("year", col("d")), "y"), a(fn("month", col("t")), "m"), a(fn("dayofmonth", col("d")), "dom"),
    a(fn("hour", col("t")), "h"), a(fn("minute", col("t")), "mi"), a(fn("second", col("t")), "sec"),
    a(fn("dayofweek", col("d")), "dow"), a(fn("weekday", col("d")), "wd"), a(fn("dayofyear", col("d")), "doy"),
    a(fn("weekofyear", col("d")), "woy"), a(fn("quarter", col("d")), "q"),
    a(fn("year", col("s")), "y_s"), a(fn("hour", col("s")), "h_s"),
]}], [dt_rows[:3], [], dt_rows[3:]]))
cases.append(case("date-arithmetic", dt_in, [{"op": "select", "exprs": [
    a(fn("last_day", col("d")), "last"), a(fn("add_months", col("d"), lit(1)), "plus_month"),
    a(fn("add_months", col("d"), lit(-13)), "minus_13"), a(fn("date_add", col("d"), lit(1)), "next"),
    a(fn("date_sub", col("d"), lit(1)), "prev"), a(fn("datediff", col("d"), fn("to_date", col("s"))), "diff"),
    a(fn("datediff", fn("to_date", col("t")), col("d")), "diff_t"),
    a(fn("next_day", col("d"), py("Mon")), "next_mon"), a(fn("months_between", col("t"), col("d")), "mb"),
    a(fn("months_between", col("t"), col("d"), py(False)), "mb_raw"),
    a(fn("unix_timestamp", col("t")), "unix_t"),
    a(fn("from_unixtime", fn("unix_timestamp", col("t"))), "from_unix"),
    a(fn("from_unixtime", fn("unix_timestamp", col("t")), py("yyyy/MM/dd HH")), "from_unix_fmt"),
    a(fn("unix_date", col("d")), "unix_date"), a(fn("unix_seconds", col("t")), "unix_seconds"), a(fn("unix_millis", col("t")), "unix_millis"),
]}], [dt_rows]))
pat_in = inp(("s", "string"), ("y", "int"), ("mo", "int"), ("dd", "int"))
cases.append(case("parse-patterns", pat_in, [{"op": "select", "exprs": [
    a(fn("to_timestamp", col("s"), py("dd/MM/yyyy HH:mm")), "ts"), a(fn("to_date", col("s"), py("dd/MM/yyyy HH:mm")), "d"),
    a(fn("unix_timestamp", col("s"), py("dd/MM/yyyy HH:mm")), "unix"),
    a(fn("try_to_timestamp", col("s"), lit("dd/MM/yyyy")), "try_ts"),
    a(fn("make_date", col("y"), col("mo"), col("dd")), "made"),
]}], [[["02/01/2024 03:04", 2024, 2, 29], ["31/12/1969 23:59", 1969, 12, 31]], [[None, None, 1, 1], ["29/02/2024 00:00", 2000, 2, 29]]]))
cases.append(case("to-timestamp-bad-month", inp(("s", "string")), [{"op": "select", "exprs": [a(fn("to_timestamp", col("s"), py("yyyy-MM-dd")), "ts")]}],
                  [[["2024-01-02"]], [["2024-13-02"]]], notes="CANNOT_PARSE_TIMESTAMP under ANSI in the second batch"))
cases.append(case("to-date-garbage", inp(("s", "string")), [{"op": "select", "exprs": [a(fn("to_date", col("s")), "d")]}],
                  [[["garbage"]]], notes="CAST_INVALID_INPUT under ANSI"))
cases.append(case("unix-timestamp-garbage", inp(("s", "string")), [{"op": "select", "exprs": [a(fn("unix_timestamp", col("s")), "u")]}],
                  [[["garbage"]]], notes="CANNOT_PARSE_TIMESTAMP under ANSI"))
cases.append(case("make-date-not-leap", inp(("y", "int")), [{"op": "select", "exprs": [a(fn("make_date", col("y"), lit(2), lit(29)), "d")]}],
                  [[[2024]], [[2023]]], notes="DATETIME_FIELD_OUT_OF_BOUNDS under ANSI"))
dec_in = inp(("a", "decimal(10,2)"), ("b", "decimal(5,1)"), ("n", "int"), ("s", "string"))
cases.append(case("decimal-arithmetic", dec_in, [{"op": "select", "exprs": [
    a(fn("+", col("a"), col("b")), "sum"), a(fn("-", col("a"), col("b")), "diff"), a(fn("*", col("a"), col("b")), "prod"),
    a(fn("/", col("a"), col("b")), "quot"), a(fn("%", col("a"), col("b")), "rem"), a(fn("+", col("a"), col("n")), "plus_int"),
    a(fn("*", col("a"), lit(3)), "times_lit"), a(fn("+", col("a"), lit(1.5)), "plus_double"), a(fn("-", lit(0), col("a")), "neg"),
    a(fn("try_divide", col("a"), col("b")), "try_quot"),
    a(fn("cast", col("a"), to="double"), "as_double"), a(fn("cast", col("a"), to="bigint"), "as_long"),
    a(fn("cast", col("a"), to="string"), "as_string"), a(fn("cast", col("s"), to="decimal(6,3)"), "parsed"),
    a(fn("cast", col("n"), to="decimal(12,1)"), "from_int"), a(fn(">", col("a"), col("b")), "gt"), a(fn("=", col("a"), col("b")), "eq"),
]}], [[[1.25, 2.5, 3, "1.0005"], [-0.05, 0.3, -1, "-2"], [2.5, 2.5, 0, " 7.25 "]], [[None, 1.0, None, None], [99999999.99, 0.1, 2147483647, "1e2"]]]))
cases.append(case("decimal-overflow", inp(("a", "decimal(38,0)")), [{"op": "select", "exprs": [a(fn("+", col("a"), col("a")), "twice")]}],
                  [[[1]], [[99999999999999999999999999999999999999]]], notes="NUMERIC_VALUE_OUT_OF_RANGE under ANSI"))
cases.append(case("decimal-divide-by-zero", inp(("a", "decimal(10,2)"), ("b", "decimal(10,2)")), [{"op": "select", "exprs": [a(fn("/", col("a"), col("b")), "q")]}],
                  [[[1, 2]], [[1, 0]]], notes="DIVIDE_BY_ZERO under ANSI"))
cases.append(case("decimal-cast-malformed", inp(("s", "string")), [{"op": "select", "exprs": [a(fn("cast", col("s"), to="decimal(4,2)"), "d")]}],
                  [[["1.5"]], [["abc"]]], notes="CAST_INVALID_INPUT under ANSI"))
cases.append(case("decimal-cast-overflow", inp(("s", "string")), [{"op": "select", "exprs": [a(fn("cast", col("s"), to="decimal(4,2)"), "d")]}],
                  [[["12.345"]], [["123.456"]]], notes="NUMERIC_VALUE_OUT_OF_RANGE under ANSI"))
cases.append(case("decimal-aggregate", inp(("k", "string"), ("a", "decimal(10,2)")), [
    {"op": "groupBy", "keys": [col("k")]},
    {"op": "agg", "aggs": [a(fn("sum", col("a")), "total"), a(fn("avg", col("a")), "mean"), a(fn("min", col("a")), "lo"), a(fn("max", col("a")), "hi"), a(fn("count", col("a")), "n")]}],
    [[["x", 1.25], ["x", 2.5], ["y", None]], [["x", 0.1], ["y", 0.2], ["y", 0.1]], []], mode="complete"))
cases.append(case("date-group", inp(("s", "string"), ("v", "long")), [
    {"op": "groupBy", "keys": [a(fn("to_date", col("s")), "day")]},
    {"op": "agg", "aggs": [a(fn("count", col("v")), "n"), a(fn("max", fn("to_timestamp", col("s"))), "latest")]}],
    [[["2024-01-02 10:00:00", 1], ["2024-01-02 23:59:59", 2], ["2024-01-03 00:00:00", 3]], [["2024-01-03 12:00:00", 4], [None, 5]]], mode="complete"))
cases.append(case("dedup-decimal-date", inp(("a", "decimal(5,1)"), ("d", "date"), ("tag", "string")), [
    {"op": "dropDuplicates", "columns": ["a", "d"]}, {"op": "select", "exprs": [col("tag")]}],
    [[[1.5, "2024-01-01", "a"], [1.5, "2024-01-01", "b"], [1.5, "2024-01-02", "c"]], [[1.5, "2024-01-02", "d"], [2, "2024-01-02", "e"]]]))
cases.append(case("date-binary-casts", inp(("s", "string"), ("t", "timestamp"), ("d", "date")), [{"op": "select", "exprs": [
    a(fn("cast", col("s"), to="date"), "s_date"), a(fn("cast", col("d"), to="string"), "d_string"), a(fn("cast", col("d"), to="timestamp"), "d_ts"),
    a(fn("cast", col("t"), to="date"), "t_date"), a(fn("cast", col("s"), to="binary"), "bin"),
    a(fn("cast", fn("cast", col("s"), to="binary"), to="string"), "round_trip"), a(fn("=", col("d"), fn("cast", col("s"), to="date")), "same_day"),
    a(fn("<", col("d"), fn("cast", col("t"), to="date")), "before"),
]}], [[["2024-2-3 junk", 1706962800, "2024-02-03"], ["2024", -86401, "1970-01-01"], ["2024-05", None, None]]]))
cases.append(case("map-column", inp(("k", "string"), ("m", "map<string,int>")), [
    {"op": "filter", "expr": fn("isnotnull", col("m"))}, {"op": "select", "exprs": [col("k"), col("m")]}],
    [[["a", {"x": 1, "y": None}], ["b", None]], [["c", {}]]]))
cases.append(case("date-string-comparison", inp(("d", "date"), ("t", "timestamp"), ("a", "decimal(5,2)")), [
    {"op": "filter", "expr": fn(">=", col("d"), lit("2024-01-02"))},
    {"op": "select", "exprs": [col("d"), a(fn(">", col("t"), lit("2024-01-01 12:00:00")), "after_noon"), a(fn("=", col("d"), lit("2024-01-02")), "is_2nd"),
                               a(fn("=", col("a"), lit(2)), "a_is_2"), a(fn("<", col("a"), lit(2.5)), "a_lt")]}],
    [[["2024-01-01", 1704067200, 2], ["2024-01-02", 1704196800, 2.01], ["2024-01-03", None, None]]]))
cases.append(case("date-conversions", inp(("d", "date"), ("n", "long")), [{"op": "select", "exprs": [
    a(fn("day", col("d")), "day"), a(fn("date_from_unix_date", col("n")), "from_unix_date"),
    a(fn("timestamp_millis", col("n")), "ts_millis"), a(fn("timestamp_micros", col("n")), "ts_micros"),
    # The batch's date is not fixed between the engines; both must agree it is today's date of the batch time.
    a(fn("=", fn("current_date"), fn("to_date", fn("current_timestamp"))), "current_is_today"),
    a(fn("=", fn("curdate"), fn("current_date")), "curdate_is_current"),
]}], [[["2024-02-29", 19782], ["1969-12-31", -1]], [[None, None]]]))
import os
# Strings to timestamp and date under ANSI (issue 11): Spark's forms of the cast, a malformed string
# raising CAST_INVALID_INPUT (an explicit cast, to_timestamp, and the implicit cast of a comparison),
# try_cast giving NULL.
ts_forms = [["2024-5-1"], ["2024"], ["2024-05"], ["2024-05-01T10"], ["2024-05-01 1:2:3"], [" 2024-05-01 "],
            ["2024-05-01 10:00:00 UTC"], ["2024-05-01T10:00:00+01"], ["2024-05-01T10:00:00+0130"], ["2024-05-01 10:00:00 GMT+2"],
            ["2024-05-01T10:00:00America/Los_Angeles"], ["2024-05-01 10:00:00.1234567"], ["2024-03-10 02:30:00 America/Los_Angeles"],
            ["2024-11-03 01:30:00 America/Los_Angeles"], [None]]
cases.append(case("cast-timestamp-spark-forms", inp(("s", "string")), [{"op": "select", "exprs": [
    col("s"), a(fn("cast", col("s"), to="timestamp"), "ts"), a(fn("to_timestamp", col("s")), "to_ts"), a(fn("cast", col("s"), to="date"), "d")]}],
    [ts_forms]))
cases.append(case("cast-timestamp-malformed", inp(("s", "string")), [{"op": "select", "exprs": [a(fn("cast", col("s"), to="timestamp"), "ts")]}],
    [[["2024-05-01 10:00:00"]], [["x"]]], notes="CAST_INVALID_INPUT under ANSI in the second batch"))
cases.append(case("cast-timestamp-impossible", inp(("s", "string")), [{"op": "select", "exprs": [a(fn("cast", col("s"), to="timestamp"), "ts")]}],
    [[["2024-02-29 00:00:00"]], [["2024-02-30 10:00:00"]]], notes="CAST_INVALID_INPUT under ANSI in the second batch"))
cases.append(case("cast-timestamp-dangling-t", inp(("s", "string")), [{"op": "select", "exprs": [a(fn("cast", col("s"), to="timestamp"), "ts")]}],
    [[["2024-05-01T10"]], [["2024-05-01T"]]], notes="a T with no time after it: CAST_INVALID_INPUT under ANSI in the second batch"))
cases.append(case("cast-date-malformed", inp(("s", "string")), [{"op": "select", "exprs": [a(fn("cast", col("s"), to="date"), "d")]}],
    [[["2024-05-01"]], [["2024-13-01"]]], notes="CAST_INVALID_INPUT under ANSI in the second batch"))
cases.append(case("try-cast-datetime-malformed", inp(("s", "string")), [{"op": "select", "exprs": [
    col("s"), a({"sql": "try_cast(s AS timestamp)"}, "ts"), a({"sql": "try_cast(s AS date)"}, "d"), a(fn("try_to_timestamp", col("s")), "try_ts")]}],
    [[["x"], ["2024-13-01"], ["2024-05-01 10:00"], ["2024-02-30"], [""], [None]]]))
cases.append(case("timestamp-vs-malformed-string", inp(("t", "timestamp"), ("s", "string")), [
    {"op": "filter", "expr": fn(">", col("t"), col("s"))}, {"op": "select", "exprs": [col("t"), col("s")]}],
    [[[1714557600, "2024-05-01"], [1714557600, "2024-06-01 00:00"]], [[1714557600, "x"]]],
    notes="the string side is cast to timestamp: CAST_INVALID_INPUT under ANSI in the second batch"))
cases.append(case("timestamp-vs-malformed-literal", inp(("t", "timestamp"),), [
    {"op": "filter", "expr": fn(">", col("t"), lit("yesterday"))}, {"op": "select", "exprs": [col("t")]}],
    [[[1714557600]]], notes="a malformed literal: Sluice refuses the query when defined (known divergence: Spark 4.0.1 streaming keeps no row, a batch query raises)"))
cases.append(case("date-vs-malformed-string", inp(("d", "date"), ("s", "string")), [
    {"op": "select", "exprs": [col("d"), a(fn("=", col("d"), col("s")), "same"), a(fn("<=>", col("d"), col("s")), "same_ns")]}],
    [[["2024-05-01", "2024-05-01 10:00"], ["2024-05-01", "2024-5-2"], ["2024-05-01", None]], [["2024-05-01", "May 1st"]]],
    notes="the string side is cast to date: CAST_INVALID_INPUT under ANSI in the second batch"))
cases.append(case("timestamp-in-malformed-string", inp(("t", "timestamp"), ("s", "string")), [
    {"op": "select", "exprs": [col("t"), a(fn("in", col("t"), col("s")), "found")]}],
    [[[1714557600, "2024-05-01 10:00:00"], [1714557600, "2024-05-01"]], [[1714557600, "x"]]],
    notes="IN casts the string to timestamp too: CAST_INVALID_INPUT under ANSI in the second batch"))

# A TIMESTAMP field read by from_json (as the JSON and CSV readers read one without a
# timestampFormat): the cast's forms, more fraction digits, malformed text as NULL (Spark's
# permissive mode). Sluice's source decoders use the same parser. Left out: a time without a date
# (Spark takes the current date) and times beyond ±2^53 µs (Spark holds them): the decoders
# dead-letter both, from_json gives NULL.
json_ts_forms = [["2024-05-01T10:00:00Z"], ["2024-5-1"], ["2024"], ["2024-05-01T10"], ["2024-05-01 1:2:3"], [" 2024-05-01 "],
                 ["2024-05-01 10:00:00 UTC"], ["2024-05-01T10:00:00+01"], ["2024-05-01 10:00:00 GMT+2"], ["2024-05-01T10:00:00America/Los_Angeles"],
                 ["2024-05-01 10:00:00 +01:00"], ["2024-05-01T10:00:00.1234567891Z"], ["2024-02-30"], ["2024-05-01T"], ["x"], ["1714557600"], [None]]
cases.append(case("from-json-timestamp-forms", inp(("s", "string")), [{"op": "select", "exprs": [
    col("s"), a({"sql": "from_json(to_json(named_struct('ts', s)), 'ts timestamp').ts"}, "ts")]}],
    [json_ts_forms]))

json.dump(cases, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases", "types.json"), "w"), indent=1)
print(len(cases))
