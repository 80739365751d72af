import BinaryCoding
import GattLayout
import Testing

/// Bad layouts: each is rejected with the key path that is wrong.
@Suite struct GattLayoutSchemaTests {
    func path(_ text: String) -> String? {
        guard case let .invalidLayout(path, _)? = layoutError({ _ = try GattLayout(json: json(text)) })
        else { return nil }
        return path
    }

    func reason(_ text: String) -> String? {
        guard case let .invalidLayout(_, reason)? = layoutError({ _ = try GattLayout(json: json(text)) })
        else { return nil }
        return reason
    }

    @Test func unknownKeysNameTheirPath() {
        #expect(path(#"{"fields":[{"name":"a","type":"u8"}],"feilds":1}"#) == "feilds")
        #expect(path(#"{"fields":[{"name":"a","type":"u8"},{"name":"b","type":"u8","scael":2}]}"#) == "fields[1].scael")
        #expect(reason(#"{"fields":[{"name":"a","type":"u8","scael":2}]}"#)?.hasPrefix("unknown key 'scael'") == true)
        #expect(path(#"{"fields":[{"type":"flags","bits":[{"name":"x","bit":0,"colour":1}]}]}"#) == "fields[0].bits[0].colour")
        #expect(path(#"{"fields":[{"name":"s","type":"struct","fields":[{"name":"x","type":"u8","typo":1}]}]}"#) == "fields[0].fields[0].typo")
        // A known key on a type it does not apply to.
        #expect(path(#"{"fields":[{"name":"a","type":"utf8","scale":2}]}"#) == "fields[0].scale")
        #expect(reason(#"{"fields":[{"name":"a","type":"utf8","scale":2}]}"#) == "key 'scale' does not apply to type 'utf8'")
        #expect(path(#"{"fields":[{"name":"a","type":"float32","enum":{"1":"x"}}]}"#) == "fields[0].enum")
    }

    @Test func wrongShapes() {
        #expect(path("[]") == "")
        #expect(reason(#"{"name":"x"}"#) == "missing key 'fields'")
        #expect(path(#"{"fields":{}}"#) == "fields")
        #expect(path(#"{"fields":[]}"#) == "fields")
        #expect(path(#"{"fields":[7]}"#) == "fields[0]")
        #expect(reason(#"{"fields":[{"name":"a"}]}"#) == "missing key 'type'")
        #expect(reason(#"{"fields":[{"type":"u8"}]}"#) == "missing key 'name'")
        #expect(path(#"{"fields":[{"name":"a","type":"u7"}]}"#) == "fields[0].type")
        #expect(path(#"{"fields":[{"name":"a","type":"u72"}]}"#) == "fields[0].type")
        #expect(path(#"{"fields":[{"name":"a","type":"nope"}]}"#) == "fields[0].type")
        #expect(path(#"{"fields":[{"name":"","type":"u8"}]}"#) == "fields[0].name")
        #expect(path(#"{"fields":[{"name":1,"type":"u8"}]}"#) == "fields[0].name")
        #expect(path(#"{"fields":[{"name":"a","type":"u8","endian":"middle"}]}"#) == "fields[0].endian")
        #expect(path(#"{"fields":[{"name":"a","type":"u8","scale":0}]}"#) == "fields[0].scale")
        #expect(path(#"{"fields":[{"name":"a","type":"u8","scale":"1/0"}]}"#) == "fields[0].scale")
        #expect(path(#"{"fields":[{"name":"a","type":"u8","min":5,"max":1}]}"#) == "fields[0].max")
        #expect(path(#"{"fields":[{"name":"a","type":"utf8","length":0}]}"#) == "fields[0].length")
        #expect(path(#"{"fields":[{"name":"a","type":"bytes","length":513}]}"#) == "fields[0].length")
        #expect(path(#"{"fields":[{"type":"pad"}]}"#) == "fields[0]")
        #expect(path(#"{"fields":[{"name":"a","type":"u8","repeat":0}]}"#) == "fields[0].repeat")
        #expect(path(#"{"fields":[{"name":"a","type":"u8","repeat":"all"}]}"#) == "fields[0].repeat")
        #expect(path(#"{"fields":[{"name":"a","type":"utf8","repeat":2}]}"#) == "fields[0].repeat")
        #expect(path(#"{"uuid":"xyz","fields":[{"name":"a","type":"u8"}]}"#) == "uuid")
        #expect(path(#"{"uuid":1800,"fields":[{"name":"a","type":"u8"}]}"#) == "uuid")
        #expect(path(#"{"uuid":"2a3","fields":[{"name":"a","type":"u8"}]}"#) == "uuid")
        #expect(path(#"{"uuid":"0000fff1-0000-1000-8000-00805f9b34fg","fields":[{"name":"a","type":"u8"}]}"#) == "uuid")
        #expect(path(#"{"fields":[{"name":"s","type":"struct","fields":[]}]}"#) == "fields[0].fields")
    }

    @Test func enums() {
        #expect(path(#"{"fields":[{"name":"a","type":"u8","enum":{"256":"x"}}]}"#) == "fields[0].enum.256")
        #expect(path(#"{"fields":[{"name":"a","type":"u8","enum":{"one":"x"}}]}"#) == "fields[0].enum.one")
        #expect(path(#"{"fields":[{"name":"a","type":"u8","enum":{"1":"x","2":"x"}}]}"#) == "fields[0].enum.2")
        #expect(path(#"{"fields":[{"name":"a","type":"u8","enum":{"1":"x","0x01":"y"}}]}"#) == "fields[0].enum.0x01")
        #expect(path(#"{"fields":[{"name":"a","type":"u8","enum":{}}]}"#) == "fields[0].enum")
        #expect(path(#"{"fields":[{"name":"a","type":"u8","enum":{"1":"x"},"scale":2}]}"#) == "fields[0].enum")
    }

    @Test func flagsAndConditions() {
        #expect(path(#"{"fields":[{"type":"flags","bits":[{"name":"x","bit":8}]}]}"#) == "fields[0].bits[0].bit")
        #expect(path(#"{"fields":[{"type":"flags","size":9,"bits":[{"name":"x","bit":0}]}]}"#) == "fields[0].size")
        #expect(path(#"{"fields":[{"type":"flags","bits":[{"name":"x","bit":6,"width":3}]}]}"#) == "fields[0].bits[0].width")
        #expect(path(#"{"fields":[{"type":"flags","bits":[{"name":"x","bit":0,"width":2},{"name":"y","bit":1}]}]}"#) == "fields[0].bits[1].bit")
        #expect(path(#"{"fields":[{"type":"flags","bits":[{"name":"x","bit":0},{"name":"x","bit":1}]}]}"#) == "fields[0].bits[1].name")
        #expect(path(#"{"fields":[{"type":"flags","bits":[]}]}"#) == "fields[0].bits")
        #expect(path(#"{"fields":[{"type":"flags","bits":[{"bit":0}]}]}"#) == "fields[0].bits[0]")
        // A condition must name a flag bit declared earlier.
        #expect(path(#"{"fields":[{"name":"a","type":"u8","present_if":"x"},{"type":"flags","bits":[{"name":"x","bit":0}]}]}"#) == "fields[0].present_if")
        #expect(path(#"{"fields":[{"type":"flags","bits":[{"name":"x","bit":0}]},{"name":"a","type":"u8","present_unless":"y"}]}"#) == "fields[1].present_unless")
        #expect(path(#"{"fields":[{"type":"flags","bits":[{"name":"x","bit":0}]},{"name":"a","type":"u8","present_if":"x","present_unless":"x"}]}"#) == "fields[1].present_if")
        // Presence bits are single bits without enum.
        #expect(path(#"{"fields":[{"type":"flags","bits":[{"name":"x","bit":0,"width":2}]},{"name":"a","type":"u8","present_if":"x"}]}"#) == "fields[0].bits[0]")
        // Flags only at the top level; conditions only at the top level.
        #expect(path(#"{"fields":[{"name":"s","type":"struct","fields":[{"type":"flags","bits":[{"name":"x","bit":0}]}]}]}"#) == "fields[0].fields[0].type")
        #expect(path(#"{"fields":[{"type":"flags","bits":[{"name":"x","bit":0}]},{"name":"s","type":"struct","fields":[{"name":"a","type":"u8","present_if":"x"}]}]}"#) == "fields[1].fields[0].present_if")
    }

    @Test func namesAndRest() {
        #expect(path(#"{"fields":[{"name":"a","type":"u8"},{"name":"a","type":"u16"}]}"#) == "fields[1].name")
        #expect(path(#"{"fields":[{"type":"flags","bits":[{"name":"a","bit":0}]},{"name":"a","type":"u16"}]}"#) == "fields[1].name")
        #expect(path(#"{"fields":[{"type":"flags","bits":[{"name":"x","bit":0}]},{"name":"x","type":"u8","present_if":"x"}]}"#) == "fields[1]")
        // Alternatives must use one bit with opposite senses.
        #expect(path(#"{"fields":[{"type":"flags","bits":[{"name":"x","bit":0}]},{"name":"a","type":"u8","present_if":"x"},{"name":"a","type":"u16","present_if":"x"}]}"#) == "fields[2].name")
        #expect(path(#"{"fields":[{"type":"flags","bits":[{"name":"x","bit":0}]},{"name":"a","type":"u8","present_if":"x"},{"name":"a","type":"u16","present_unless":"x"},{"name":"a","type":"u32","present_if":"x"}]}"#) == "fields[3].name")
        // Only the last field may take the rest.
        #expect(path(#"{"fields":[{"name":"a","type":"utf8"},{"name":"b","type":"u8"}]}"#) == "fields[1]")
        #expect(path(#"{"fields":[{"name":"a","type":"u8","repeat":"rest"},{"name":"b","type":"u8"}]}"#) == "fields[1]")
        #expect(path(#"{"fields":[{"name":"s","type":"struct","fields":[{"name":"a","type":"bytes"}]},{"name":"b","type":"u8"}]}"#) == "fields[0].fields[0]")
    }

    @Test func descriptionsNameThePath() {
        let e = GattLayoutError.invalidLayout(path: "fields[1].type", reason: "unknown type 'u7'")
        #expect(e.description == "invalid layout at fields[1].type: unknown type 'u7'")
        #expect(GattLayoutError.needMoreData(field: "rr_intervals[1]", offset: 4, needed: 2, available: 1).description
            == "need more data: field 'rr_intervals[1]' at byte 4 needs 2 byte(s), only 1 left")
        #expect(GattLayoutError.malformed(field: "v", offset: 3, reason: "not valid UTF-8").description
            == "malformed: field 'v' at byte 3: not valid UTF-8")
    }
}
