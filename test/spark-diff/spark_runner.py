"""Runs spark-diff cases on real PySpark, one JVM for the whole run.

Protocol (driven by run-spark-diff.ts): one JSON case per stdin line; for each, one stdout line
`@@RESULT <json>`. After start-up, one line `@@READY <json>` with the start-up time. Spark's own
logging goes to stderr.

Each stream input is a MemoryStream[String] of JSON lines parsed with from_json, so one step's
rows for several inputs are added under the query's progress lock: they land in one micro-batch,
as Spark's StreamTest MultiAddData does. An empty step still adds an (empty) offset, as
MemoryStream.addData does, so it runs a data batch with no rows.
"""
import datetime as dt
import json
import math
import sys
import time
import traceback

T0 = time.time()
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.column import Column  # noqa: E402

from pyspark import cloudpickle  # noqa: E402

import stateful_processors  # noqa: E402

EPOCH = dt.datetime(1970, 1, 1)


def build_session(conf):
    b = (SparkSession.builder.master("local[2]").appName("sluice-spark-diff")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.streaming.noDataProgressEventInterval", "600000")
         .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -Duser.timezone=UTC"))
    for k, v in conf.items():
        b = b.config(k, v)
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    return s


spark = build_session({})
jvm = spark._jvm
# Python workers (and transformWithStateInPandas' driver-side runner, which addPyFile does not
# reach) would unpickle the stateful cases' code by module name: pickle it by value instead.
cloudpickle.register_pickle_by_value(stateful_processors)
STARTUP_S = time.time() - T0


def micros_to_text(us):
    return (EPOCH + dt.timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%S.%f")


def to_spark_value(v, t):
    if v is None:
        return None
    if t == "timestamp":
        if isinstance(v, dict) and "$ts" in v:
            raise ValueError("$ts values are not supported by spark-diff cases; use seconds")
        return micros_to_text(round(v * 1_000_000))
    return v


def ddl(schema):
    return ", ".join(f"`{f['name']}` {f['type']}" for f in schema)


# ---- expressions ------------------------------------------------------------------------------
BINARY = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
    "%": lambda a, b: a % b,
    "=": lambda a, b: a == b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "and": lambda a, b: a & b, "or": lambda a, b: a | b, "<=>": lambda a, b: a.eqNullSafe(b),
}
AGGREGATES = {"count", "sum", "avg", "min", "max", "first", "last", "collect_list", "collect_set",
              "approx_count_distinct"}


def expr(e):
    if "expr" in e and "as" in e:
        return expr(e["expr"]).alias(e["as"])
    if "col" in e:
        return F.col(f"{e['qualifier']}.{e['col']}" if e.get("qualifier") else e["col"])
    if "lit" in e:
        return F.lit(e["lit"])
    if "py" in e:  # a plain Python argument (a pattern, a unit) where PySpark takes no Column
        return e["py"]
    if "interval" in e:
        return F.expr(f"INTERVAL {e['interval']}")
    if "star" in e:
        return F.col("*")
    if "sql" in e:
        return F.expr(e["sql"])
    if "fn" in e:
        return call(e)
    raise ValueError(f"unknown expression {e}")


def call(e):
    fn = e["fn"]
    args = e.get("args", [])
    a = [expr(x) for x in args if not (fn in AGGREGATES and x.get("star"))]
    if fn in BINARY:
        return BINARY[fn](a[0], a[1])
    if fn == "not":
        return ~a[0]
    if fn == "isnull":
        return a[0].isNull()
    if fn == "isnotnull":
        return a[0].isNotNull()
    if fn == "cast":
        return a[0].cast(e["to"])
    if fn == "window":
        return F.window(a[0], e["duration"], e.get("slide"), e.get("startTime"))
    if fn == "session_window":
        return F.session_window(a[0], e["gap"] if isinstance(e["gap"], str) else expr(e["gap"]))
    if fn == "between":
        return a[0].between(a[1], a[2])
    if fn == "case":
        c = None
        for cond, val in e["when"]:
            c = F.when(expr(cond), expr(val)) if c is None else c.when(expr(cond), expr(val))
        return c.otherwise(expr(e["else"])) if e.get("else") is not None else c
    if fn in AGGREGATES:
        if fn == "count" and not a:
            return F.count(F.lit(1))
        if e.get("distinct"):
            return F.count_distinct(*a) if fn == "count" else F.sum_distinct(a[0])
        if fn in ("first", "last"):
            return getattr(F, fn)(a[0], bool(e.get("ignoreNulls")))
        return getattr(F, fn)(*a)
    if fn == "in":
        return a[0].isin(*a[1:])
    # Every other function by its SQL name, its arguments as columns (literals as lit()): the
    # function registry's resolution, as Spark SQL text and Sluice's calls by name both do.
    # call_function reads a Python string as a column name: a plain argument ("py": a pattern, a
    # unit) is a literal here, as Sluice's side reads it.
    return F.call_function(fn, *[x if isinstance(x, Column) else F.lit(x) for x in a])


def new_memory_stream():
    """MemoryStream moved to ...streaming.runtime in Spark 4.1."""
    encoder = jvm.org.apache.spark.sql.Encoders.STRING()
    for pkg in ("org.apache.spark.sql.execution.streaming.runtime", "org.apache.spark.sql.execution.streaming"):
        cls = jvm
        for part in (pkg + ".MemoryStream").split("."):
            cls = getattr(cls, part)
        try:
            return cls.apply(encoder, spark._jsparkSession.sqlContext())
        except TypeError:
            continue  # a JavaPackage: not in this version
        except Exception:  # noqa: BLE001
            return cls.apply(encoder, spark._jsparkSession)
    raise RuntimeError("no MemoryStream class in this Spark")


# ---- queries ----------------------------------------------------------------------------------
class Inputs:
    def __init__(self, case):
        self.frames, self.streams, self.schemas = {}, {}, {}
        for inp in case["inputs"]:
            self.schemas[inp["name"]] = inp["schema"]
            if inp["kind"] == "stream":
                ms = new_memory_stream()
                raw = DataFrame(ms.toDF(), spark)
                parsed = raw.select(F.from_json("value", ddl(inp["schema"]),
                                                {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"}).alias("r"))
                self.frames[inp["name"]] = parsed.select("r.*")
                self.streams[inp["name"]] = ms
            else:
                rows = [[to_spark_value(v, f["type"]) for v, f in zip(r, inp["schema"])] for r in inp["rows"]]
                cols = [F.col(f["name"]).cast(f["type"]).alias(f["name"]) for f in inp["schema"]]
                as_text = spark.createDataFrame(rows, ", ".join(
                    f"`{f['name']}` {'string' if f['type'] == 'timestamp' else f['type']}" for f in inp["schema"]))
                self.frames[inp["name"]] = as_text.select(*cols)

    def add(self, name, rows):
        schema = self.schemas[name]
        lines = [json.dumps({f["name"]: to_spark_value(v, f["type"]) for v, f in zip(r, schema)}) for r in rows]
        self.streams[name].addData(jvm.org.apache.spark.api.python.PythonUtils.toSeq(lines))


def build_query(ops, inputs):
    df, grouping, keys = None, None, None
    for op in ops:
        k = op["op"]
        if k == "source":
            df = inputs.frames[op["input"]]
        elif k == "select":
            df = df.select(*[expr(x) for x in op["exprs"]])
        elif k == "withColumn":
            df = df.withColumn(op["name"], expr(op["expr"]))
        elif k == "filter":
            df = df.filter(op["sql"] if "sql" in op else expr(op["expr"]))
        elif k == "selectExpr":
            df = df.selectExpr(*op["exprs"])
        elif k == "createTempView":
            df.createOrReplaceTempView(op["name"])
        elif k == "sql":
            df = spark.sql(op["query"])
        elif k == "withWatermark":
            df = df.withWatermark(op["column"], op["delay"])
        elif k == "groupBy":
            grouping = [expr(x) for x in op["keys"]]
        elif k == "agg":
            df = df.groupBy(*(grouping or [])).agg(*[expr(x) for x in op["aggs"]])
            grouping = None
        elif k == "dropDuplicates":
            df = df.dropDuplicates(op.get("columns"))
        elif k == "dropDuplicatesWithinWatermark":
            df = df.dropDuplicatesWithinWatermark(op.get("columns"))
        elif k == "orderBy":
            df = df.orderBy(*[expr(x["expr"]).desc() if x.get("desc") else expr(x["expr"]).asc() for x in op["keys"]])
        elif k == "join":
            right = build_query(op["right"], inputs)
            left = df.alias(op["leftAs"]) if op.get("leftAs") else df
            right = right.alias(op["rightAs"]) if op.get("rightAs") else right
            on = op.get("using") or (expr(op["on"]) if op.get("on") else None)
            df = left.join(right, on, op.get("type", "inner"))
        elif k == "union":
            df = df.union(build_query(op["other"], inputs))
        elif k == "sample":
            df = df.sample(op.get("fraction", 0.5), op.get("seed"))
        elif k == "groupByKey":
            keys = op["keys"]
        elif k == "flatMapGroupsWithState":
            # The Python form of flatMapGroupsWithState: the function and its state schema by name.
            fn, state_schema = stateful_processors.APPLY_IN_PANDAS[op["function"]]
            df = df.groupBy(*keys).applyInPandasWithState(
                fn, op["outputSchema"], state_schema, op["outputMode"],
                stateful_processors.TIMEOUTS[op.get("timeout", "none")])
        elif k == "transformWithState":
            processor = stateful_processors.PROCESSORS[op["processor"]]()
            df = df.groupBy(*keys).transformWithStateInPandas(
                processor, op["outputSchema"], op["outputMode"], op.get("timeMode", "none"))
        else:
            raise ValueError(f"op {k} is not mapped to PySpark")
    return df


# ---- values -----------------------------------------------------------------------------------
def plain(v):
    if v is None:
        return None
    if isinstance(v, float) and not math.isfinite(v):
        # JSON has no NaN or infinities: both sides write them as these strings.
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, dt.datetime):
        return round((v.replace(tzinfo=None) - EPOCH) / dt.timedelta(microseconds=1))
    if isinstance(v, dt.date):  # days since the epoch, as Sluice keeps a date
        return (v - EPOCH.date()).days
    if isinstance(v, (bytes, bytearray)):
        return list(v)
    if hasattr(v, "asDict"):
        return {k: plain(x) for k, x in v.asDict(recursive=False).items()}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if type(v).__name__ == "Decimal":
        return str(v)  # exact digits and scale, compared as text
    return v


def refusal(phase, err):
    cls = None
    for getter in ("getCondition", "getErrorClass"):
        if hasattr(err, getter):
            try:
                cls = getattr(err, getter)()
            except Exception:  # noqa: BLE001
                cls = None
            if cls:
                break
    text = str(err).strip()
    return {"phase": phase, "errorClass": cls, "message": text.split("\n")[0][:600], "type": type(err).__name__,
            "detail": text[:6000]}


def watermark_ms(p):
    w = (p.get("eventTime") or {}).get("watermark")
    if w is None:
        return None
    return round((dt.datetime.strptime(w, "%Y-%m-%dT%H:%M:%S.%fZ") - EPOCH) / dt.timedelta(milliseconds=1))


def run_case(case):
    result = {"id": case["id"], "steps": [], "refusal": None}
    for k, v in (case.get("conf") or {}).items():
        spark.conf.set(k, v)
    try:
        inputs = Inputs(case)
        try:
            df = build_query(case["query"], inputs)
        except ValueError:
            raise
        except Exception as err:  # noqa: BLE001
            result["refusal"] = refusal("definition", err)
            return result
        batches = []

        def record(batch_df, batch_id):
            batches.append({"batchId": batch_id, "rows": [[plain(x) for x in r] for r in batch_df.collect()]})

        try:
            q = df.writeStream.outputMode(case["outputMode"]).foreachBatch(record).start()
        except Exception as err:  # noqa: BLE001
            result["refusal"] = refusal("start", err)
            return result
        try:
            lock = q._jsq.streamingQuery().awaitProgressLock()
            for step in case["steps"]:
                before = len(batches)
                lock.lock()
                try:
                    for name, rows in step.items():
                        inputs.add(name, rows)
                finally:
                    lock.unlock()
                q.processAllAvailable()
                progress = {}
                for p in q.recentProgress:
                    if "addBatch" in (p["durationMs"] or {}):
                        progress[p["batchId"]] = p
                out = []
                for b in batches[before:]:
                    p = progress.get(b["batchId"])
                    out.append({**b, "progress": None if p is None else {
                        "numInputRows": p["numInputRows"],
                        "watermarkMs": watermark_ms(p),
                        "stateRows": [s["numRowsTotal"] for s in p["stateOperators"]],
                        "droppedByWatermark": [s["numRowsDroppedByWatermark"] for s in p["stateOperators"]],
                    }})
                result["steps"].append(out)
        except Exception as err:  # noqa: BLE001
            result["refusal"] = refusal("runtime", err)
        finally:
            try:
                q.stop()
            except Exception:  # noqa: BLE001
                pass
        return result
    finally:
        for k in (case.get("conf") or {}):
            spark.conf.unset(k)


def main():
    print("@@READY " + json.dumps({"startupSeconds": round(STARTUP_S, 2), "sparkVersion": spark.version}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        case = json.loads(line)
        t = time.time()
        try:
            res = run_case(case)
        except Exception as err:  # noqa: BLE001
            res = {"id": case.get("id"), "harnessError": "".join(traceback.format_exception(err))[-2000:]}
        res["seconds"] = round(time.time() - t, 2)
        print("@@RESULT " + json.dumps(res), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
