// A layout that uses every field type, shared by the field, property and corpus tests and the
// Layout fuzz target (Fuzz/Layout/main.swift names this file on its `fuzz-sources:` line).
// Plain Swift, no imports: scripts/fuzz compiles it beside the fuzz target.

let richLayoutJSON = """
    {"name": "rich", "uuid": "0xFFF1", "fields": [
      {"type": "flags", "size": 2, "bits": [
        {"name": "has_humidity", "bit": 0},
        {"name": "has_label", "bit": 1},
        {"name": "low_battery", "bit": 2},
        {"name": "mode", "bit": 4, "width": 2, "enum": {"0": "idle", "1": "measuring", "2": "calibrating"}},
        {"name": "wide_counter", "bit": 7},
        {"name": "has_samples", "bit": 8},
        {"name": "level", "bit": 12, "width": 4}]},
      {"name": "temperature", "type": "i16", "scale": 0.01, "unit": "°C"},
      {"name": "humidity", "type": "u16", "endian": "big", "scale": 0.1, "max": 100, "present_if": "has_humidity"},
      {"name": "counter", "type": "u8", "present_unless": "wide_counter"},
      {"name": "counter", "type": "u32", "present_if": "wide_counter"},
      {"name": "pressure", "type": "sfloat"},
      {"name": "energy", "type": "medfloat32", "endian": "big"},
      {"name": "ratio", "type": "float32"},
      {"name": "precise", "type": "float64", "endian": "big"},
      {"name": "big", "type": "u64"},
      {"name": "small", "type": "i64"},
      {"name": "odd", "type": "i24"},
      {"name": "state", "type": "u8", "enum": {"0": "ok", "1": "warming_up", "0x10": "fault"}},
      {"name": "serial", "type": "bytes", "length": 4},
      {"name": "label", "type": "utf8", "length": 8, "present_if": "has_label"},
      {"type": "pad", "length": 1},
      {"name": "when", "type": "date_time"},
      {"name": "pair", "type": "u16", "repeat": 2},
      {"name": "points", "type": "struct", "repeat": 2, "fields": [
        {"name": "x", "type": "i8"}, {"name": "y", "type": "u8", "scale": 0.5, "offset": -10}]},
      {"name": "samples", "type": "i8", "repeat": "rest", "present_if": "has_samples"}
    ]}
    """
