//! What one input may cost and how each input kind is refused: out-of-range clocks, texts over
//! a megabyte, gzip bombs, oversized rule files and patterns, duplicated rows, caches keyed by
//! content, names that are not UTF-8, and each kind's own error naming the user's file
//! (concurrent `.nsys-rep` exports: `nsys_rep.rs`).

use crate::util::{count, damaged_copy, fixture, nsys_lens, synth, texts};
use std::io::Write;
use std::path::Path;
use std::process::Command;

const NODE0: &str = "pithtrain_pp2_ep2/node0.sqlite";

/// Runs the binary with `NSYS_LENS_CACHE` set to `cache`.
fn with_cache(cache: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
        .args(args)
        .env("NSYS_LENS_CACHE", cache)
        .output()
        .unwrap()
}

/// A one-rank torch.profiler trace from synth, as a path in `dir`.
fn kineto_trace(dir: &Path) -> std::path::PathBuf {
    let run = synth("--preset ddp --nodes 1 --gpus-per-node 1 --steps 3 --format kineto");
    let trace = crate::util::sqlite_files(run.path());
    let json = std::fs::read_dir(run.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".json"))
        .unwrap_or_else(|| panic!("a JSON trace beside {trace:?}"));
    let copy = dir.join("rank-0.json");
    std::fs::copy(json, &copy).unwrap();
    copy
}

#[test]
fn a_session_start_beyond_the_clock_is_an_error_naming_the_field() {
    for value in [i64::MAX, i64::MIN, -1] {
        let sql = format!("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = {value}");
        let (_dir, path) = damaged_copy(NODE0, &sql);
        let out = tempfile::tempdir().unwrap();
        for args in [
            vec!["info", path.to_str().unwrap()],
            vec!["part", "-q", "-o", "-", path.to_str().unwrap()],
            vec![
                "convert",
                "-q",
                "-o",
                out.path().to_str().unwrap(),
                path.to_str().unwrap(),
            ],
        ] {
            let done = nsys_lens(&args);
            let err = texts(&done).1;
            assert_eq!(done.status.code(), Some(2), "{value}: {args:?}: {err}");
            let field = "TARGET_INFO_SESSION_START_TIME.utcEpochNs";
            assert!(
                err.contains(field) && err.contains(&value.to_string()),
                "{err}"
            );
        }
        assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
    }
}

#[test]
fn a_translation_keeps_its_trace_times_and_names_their_origin() {
    // The translation writes the trace's own times and names the first one; the reader counts
    // from it. The export reads as nsys's do: session start + raw time = the event's UTC time.
    let dir = tempfile::tempdir().unwrap();
    let trace = kineto_trace(dir.path());
    let exports = dir.path().join("exports");
    let args = ["info", "--format", "json", "--export-dir"];
    let info = |path: &Path| {
        let mut args = args.to_vec();
        args.extend([exports.to_str().unwrap(), path.to_str().unwrap()]);
        let done = with_cache(&dir.path().join("cache"), &args);
        assert!(done.status.success(), "{}", texts(&done).1);
        let rows: serde_json::Value = serde_json::from_slice(&done.stdout).unwrap();
        rows["rows"][0].clone()
    };
    let translated = info(&trace);
    let export = std::fs::read_dir(&exports)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let conn = rusqlite::Connection::open(&export).unwrap();
    let one = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
    let origin = one(
        "SELECT CAST(value AS INTEGER) FROM META_DATA_EXPORT WHERE name = 'NSYS_LENS_TIME_ORIGIN'",
    );
    let first = one(
        "SELECT min(start) FROM (SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL \
         SELECT start FROM CUPTI_ACTIVITY_KIND_RUNTIME UNION ALL SELECT start FROM NVTX_EVENTS \
         WHERE start IS NOT NULL)",
    );
    assert_eq!(origin, first, "the origin is the first event's time");
    assert!(origin > 0, "the trace's own clock: {origin}");
    let base = one("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME");
    let text = std::fs::read_to_string(&trace).unwrap();
    let stated: i64 = text
        .split("\"baseTimeNanoseconds\": ")
        .nth(1)
        .unwrap()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(base, stated, "time 0 is baseTimeNanoseconds");
    assert_eq!(
        translated["session_start_utc_ns"],
        base + origin,
        "{translated}"
    );
    // The export given itself reads the same; a damaged origin is an error naming the row.
    assert_eq!(
        info(&export)["session_start_utc_ns"],
        translated["session_start_utc_ns"]
    );
    conn.execute(
        "UPDATE META_DATA_EXPORT SET value = 'soon' WHERE name = 'NSYS_LENS_TIME_ORIGIN'",
        [],
    )
    .unwrap();
    drop(conn);
    let done = nsys_lens(&["info", export.to_str().unwrap()]);
    let err = texts(&done).1;
    assert_eq!(done.status.code(), Some(2), "{err}");
    assert!(
        err.contains("NSYS_LENS_TIME_ORIGIN") && err.contains("soon"),
        "{err}"
    );
}

#[test]
fn a_kineto_base_time_beyond_the_clock_is_an_error_not_a_wrap() {
    let dir = tempfile::tempdir().unwrap();
    let trace = kineto_trace(dir.path());
    let text = std::fs::read_to_string(&trace).unwrap();
    let text = text.replacen(
        "\"baseTimeNanoseconds\": ",
        &format!("\"baseTimeNanoseconds\": {}, \"was\": ", i64::MAX),
        1,
    );
    std::fs::write(&trace, text).unwrap();
    let done = with_cache(dir.path(), &["info", trace.to_str().unwrap()]);
    let err = texts(&done).1;
    assert_eq!(done.status.code(), Some(2), "{err}");
    assert!(
        err.contains("baseTimeNanoseconds") && err.contains("rank-0.json"),
        "{err}"
    );
}

#[test]
fn each_input_kind_is_refused_in_its_own_words_naming_the_users_file() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8], &str); 4] = [
        ("empty.json", b"{\"traceEvents\": []}", "holds no event"),
        ("words.json", b"hello", "not a valid torch.profiler trace"),
        ("host.xplane.pb", b"\x0a\xff\xff\xff", "not a valid XSpace"),
        (
            "bom-empty.json",
            b"\xEF\xBB\xBF{\"traceEvents\": []}",
            "holds no event",
        ),
    ];
    for (name, bytes, says) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let done = with_cache(&dir.path().join("cache"), &["info", path.to_str().unwrap()]);
        let err = texts(&done).1;
        assert_eq!(done.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(says) && err.contains(name), "{name}: {err}");
        assert!(
            !err.contains("cache") && !err.contains("SQLite"),
            "{name}: {err}"
        );
    }
}

#[test]
fn a_byte_order_mark_before_a_kineto_trace_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let trace = kineto_trace(dir.path());
    let plain = with_cache(
        &dir.path().join("a"),
        &[
            "kernels",
            "--whole",
            "--format",
            "json",
            "-q",
            trace.to_str().unwrap(),
        ],
    );
    assert!(plain.status.success(), "{}", texts(&plain).1);
    std::fs::create_dir(dir.path().join("marked")).unwrap();
    let marked = dir.path().join("marked").join("rank-0.json");
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(std::fs::read(&trace).unwrap());
    std::fs::write(&marked, bytes).unwrap();
    let args = [
        "kernels",
        "--whole",
        "--format",
        "json",
        "-q",
        marked.to_str().unwrap(),
    ];
    let done = with_cache(&dir.path().join("b"), &args);
    assert!(done.status.success(), "{}", texts(&done).1);
    let rows = |o: &std::process::Output| {
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["rows"].clone()
    };
    assert_eq!(rows(&plain), rows(&done));
}

#[test]
fn a_gzip_bomb_of_one_huge_string_is_refused_in_bounded_memory() {
    // 3 GiB of one string, as 192 gzip members of 16 MiB each (one compressed, repeated).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bomb.json.gz");
    let member = |bytes: &[u8]| {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(bytes).unwrap();
        gz.finish().unwrap()
    };
    let filler = member(&vec![b'a'; 16 << 20]);
    let mut file = std::fs::File::create(&path).unwrap();
    file.write_all(&member(b"{\"traceEvents\": [{\"name\": \""))
        .unwrap();
    for _ in 0..192 {
        file.write_all(&filler).unwrap();
    }
    file.write_all(&member(b"\"}]}")).unwrap();
    drop(file);
    let binary = env!("CARGO_BIN_EXE_nsys-lens");
    let script = format!("ulimit -v 2000000; exec {binary} info {}", path.display());
    let done = Command::new("bash")
        .args(["-c", &script])
        .env("NSYS_LENS_CACHE", dir.path().join("cache"))
        .output()
        .unwrap();
    let err = texts(&done).1;
    assert_eq!(done.status.code(), Some(2), "{err}");
    assert!(
        err.contains("longer than 1 MiB") && err.contains("bomb.json.gz"),
        "{err}"
    );
}

#[test]
fn a_text_over_a_megabyte_is_cut_with_a_counted_warning() {
    let sql = "UPDATE StringIds SET value = printf('%.2000000c', 'x') \
               WHERE id = (SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)";
    let (_dir, path) = damaged_copy(NODE0, sql);
    let done = nsys_lens(&["overlap", path.to_str().unwrap()]);
    let err = texts(&done).1;
    assert!(done.status.success(), "{err}");
    assert!(err.contains("1 text value(s) over 1 MiB"), "{err}");
}

#[test]
fn an_empty_string_value_is_read_as_the_empty_name() {
    // A real nsys 2022.4 capture of an MPI program failed on CI with "reading StringIds failed:
    // Invalid column type Null": SQLite's substr() of an empty BLOB, which caps each value at
    // 1 MiB, is NULL, not an empty BLOB.
    let sql = "UPDATE StringIds SET value = '' \
               WHERE id = (SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)";
    let (dir, path) = damaged_copy(NODE0, sql);
    let input = path.to_str().unwrap();
    let overlap = nsys_lens(&["overlap", "-q", input]);
    assert!(overlap.status.success(), "{}", texts(&overlap).1);
    let out = dir.path().join("out");
    let convert = nsys_lens(&["convert", "-q", "-o", out.to_str().unwrap(), input]);
    assert!(convert.status.success(), "{}", texts(&convert).1);
}

#[test]
fn duplicated_kernel_rows_are_counted_in_a_warning() {
    let sql = "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL";
    let (_dir, path) = damaged_copy(NODE0, sql);
    let kernels = count(&fixture(NODE0), "CUPTI_ACTIVITY_KIND_KERNEL");
    let done = nsys_lens(&["overlap", path.to_str().unwrap()]);
    let err = texts(&done).1;
    assert!(done.status.success(), "{err}");
    let said = format!("{kernels} kernel, copy or set row(s) repeat");
    assert!(err.contains(&said), "{said}: {err}");
    let clean = texts(&nsys_lens(&["overlap", fixture(NODE0).to_str().unwrap()])).1;
    assert!(!clean.contains("repeat the row"), "{clean}");
}

#[test]
fn oversized_rule_files_and_patterns_are_refused_without_echoing_them() {
    let input = fixture(NODE0);
    let input = input.to_str().unwrap();
    let done = nsys_lens(&["streams", "--roles", "/dev/zero", input]);
    let err = texts(&done).1;
    assert_eq!(done.status.code(), Some(2), "{err}");
    assert!(err.contains("over 1024 KiB"), "{err}");
    // An argument is at most 128 KiB on Linux; 100 KiB is far over the limit.
    let pattern = "a".repeat(100 << 10);
    let done = nsys_lens(&["overlap", "--anchor", &pattern, input]);
    let err = texts(&done).1;
    assert_eq!(done.status.code(), Some(2));
    assert!(
        err.contains("over the limit") && err.len() < 1000,
        "{}",
        &err[..err.len().min(300)]
    );
}

#[test]
fn a_trace_edited_in_place_at_the_same_size_and_time_is_translated_again() {
    let dir = tempfile::tempdir().unwrap();
    let trace = kineto_trace(dir.path());
    let cache = dir.path().join("cache");
    let first = with_cache(&cache, &["info", "-q", trace.to_str().unwrap()]);
    assert!(first.status.success(), "{}", texts(&first).1);
    let modified = std::fs::metadata(&trace).unwrap().modified().unwrap();
    let text = std::fs::read_to_string(&trace).unwrap();
    let edited = text.replacen("python3", "python4", 1);
    assert_eq!(edited.len(), text.len());
    assert_ne!(edited, text);
    std::fs::write(&trace, edited).unwrap();
    let file = std::fs::File::options().write(true).open(&trace).unwrap();
    file.set_modified(modified).unwrap();
    let second = with_cache(&cache, &["info", "-q", trace.to_str().unwrap()]);
    assert!(second.status.success(), "{}", texts(&second).1);
    let translations = std::fs::read_dir(&cache).unwrap().count();
    assert_eq!(translations, 2, "a fresh translation for the new content");
}

#[test]
fn a_name_that_is_not_utf8_opens() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let name = std::ffi::OsStr::from_bytes(b"node\xff\xfe.sqlite");
    let path = dir.path().join(name);
    std::fs::copy(fixture(NODE0), &path).unwrap();
    let done = Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
        .arg("convert")
        .arg("-q")
        .arg(&path)
        .arg("-o")
        .arg(dir.path().join(std::ffi::OsStr::from_bytes(b"out\xff")))
        .output()
        .unwrap();
    assert!(done.status.success(), "{}", texts(&done).1);
    let written = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(written, 5, "the input and four outputs");
}

#[test]
fn a_name_with_a_line_break_keeps_the_row_file_whole() {
    let dir = tempfile::tempdir().unwrap();
    let trace = kineto_trace(dir.path());
    let named = dir.path().join("rank\n0.json");
    std::fs::rename(&trace, &named).unwrap();
    let base = dir.path().join("out");
    let args = [
        "convert",
        "-q",
        "--to",
        "paraver",
        "-o",
        base.to_str().unwrap(),
        named.to_str().unwrap(),
    ];
    let done = with_cache(&dir.path().join("cache"), &args);
    assert!(done.status.success(), "{}", texts(&done).1);
    let row = std::fs::read_to_string(base.with_extension("row")).unwrap();
    let mut lines = row.lines();
    while let Some(line) = lines.next() {
        if line.is_empty() {
            continue;
        }
        let size: usize = line
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap_or_else(|_| panic!("{line:?}: {row}"));
        for _ in 0..size {
            let item = lines.next().unwrap();
            assert!(!item.is_empty(), "{row}");
        }
        assert_eq!(lines.next(), Some(""), "{row}");
    }
    assert!(row.contains("rank 0"), "{row}");
}

#[test]
fn more_inputs_than_the_soft_open_file_limit_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("run");
    std::fs::create_dir(&inputs).unwrap();
    for i in 0..80 {
        let copy = inputs.join(format!("node{i:03}.sqlite"));
        std::fs::copy(fixture(NODE0), &copy).unwrap();
        let db = rusqlite::Connection::open(&copy).unwrap();
        let sql = "UPDATE TARGET_INFO_SYSTEM_ENV SET value = ?1 WHERE name = 'Hostname'";
        db.execute(sql, [format!("host{i:03}")]).unwrap();
    }
    let binary = env!("CARGO_BIN_EXE_nsys-lens");
    let script = format!(
        "ulimit -Sn 48 && exec {binary} info -q {}",
        inputs.display()
    );
    let done = Command::new("bash").args(["-c", &script]).output().unwrap();
    let err = texts(&done).1;
    if err.contains("ulimit") {
        crate::util::skipped("cannot lower the soft open-file limit here");
        return;
    }
    assert!(done.status.success(), "{err}");
    assert!(
        texts(&done).0.contains("80 report(s)"),
        "{}",
        texts(&done).0
    );
}

#[test]
fn convert_prints_the_reading_warnings_unless_quiet() {
    let (_dir, path) = damaged_copy(NODE0, "DELETE FROM TARGET_INFO_SESSION_START_TIME");
    let out = tempfile::tempdir().unwrap();
    let base = out.path().join("t");
    let (base, path) = (base.to_str().unwrap(), path.to_str().unwrap());
    let said = |quiet: bool| {
        let mut args = vec!["convert", "-o", base, path];
        if quiet {
            args.insert(1, "-q");
        }
        let done = nsys_lens(&args);
        let err = texts(&done).1;
        assert!(done.status.success(), "{err}");
        err.contains("warning") && err.contains("no session start time")
    };
    assert!(said(false), "the warning `overlap` prints");
    assert!(!said(true), "-q keeps stderr quiet");
}
