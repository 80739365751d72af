import Foundation
import Testing

/// `gatt2mqtt layout decode --advertisement FORMAT HEX`: the reading as one JSON line, exit 0;
/// any invalid input exits 1 with one line on stderr.
@Suite struct LayoutAdvertisementCLITests {
    @Test func decodesABuiltinWhereItsVariantsRead() async throws {
        let r = try await CLI.run(["layout", "decode", "--advertisement", "govee", "00034db26400"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == #"{"values":{"temperature":21.6,"humidity":49.8,"battery":100,"problem":false},"encrypted":false}"# + "\n")
        let atc = try await CLI.run(["layout", "decode", "--advertisement", "atc", "--service", "181a", "a4:c1:38:0b:2c:5f:00:e6:2d:5d:0b:9f:1b"])
        #expect(atc.stdout == #"{"values":{"temperature":23,"humidity":45,"battery":93,"voltage":2.975},"packet_id":27,"encrypted":false}"# + "\n", "\(atc.stderr)")
        let ruuvi = try await CLI.run(["layout", "decode", "--advertisement", "ruuvi", "--manufacturer", "0x0499"],
                                      stdin: "058000FFFFFFFF800080008000FFFFFFFFFFFFFFFFFFFFFF\n")
        #expect(ruuvi.stdout == #"{"values":{},"encrypted":false}"# + "\n", "\(ruuvi.stderr)")
    }

    @Test func decodesAUsersFormatFile() async throws {
        let file = LayoutCLITests.fixture("soil-probe.yaml")
        let r = try await CLI.run(["layout", "decode", "--advertisement", file, "502ac7813a07015e"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == #"{"values":{"moisture":45.5,"battery_low":true,"temperature":18.5,"conductivity":350},"packet_id":42,"encrypted":false}"# + "\n")
        let show = try await CLI.run(["layout", "show", "--advertisement", "ruuvi"])
        #expect(show.status == 0)
        #expect(show.stdout.contains(#""packet_id": "measurement_sequence""#))
    }

    @Test func errorsNameWhatIsWrong() async throws {
        try await CLI.expectOneLineFailure(["layout", "decode", "--advertisement", "ruuvy", "05"], mentioning: "unknown advertisement format 'ruuvy'")
        try await CLI.expectOneLineFailure(
            ["layout", "decode", "--advertisement", "ruuvi", "--manufacturer", "0x0499", "0512FC"],
            mentioning: "ruuvi")  // not its length: not a RuuviTag advertisement
        try await CLI.expectOneLineFailure(["layout", "decode", "--advertisement", "atc", "--service", "18", "00"], mentioning: "--service")
        try await CLI.expectOneLineFailure(["layout", "decode", "--advertisement", "atc", "--manufacturer", "70000", "00"], mentioning: "--manufacturer")
        try await CLI.expectOneLineFailure(["layout", "decode", "--advertisement", "atc", "--address", "nope", "00"], mentioning: "--address")
        try await CLI.expectOneLineFailure(["layout", "decode", "--advertisement", "atc", "--layout", "builtin:battery_level", "00"], mentioning: "either")
        try await CLI.expectOneLineFailure(
            ["layout", "decode", "--advertisement", LayoutCLITests.fixture("bad-advertisement.yaml"), "00"],
            mentioning: "invalid layout at match.lenght: unknown key 'lenght'")
        let bad = try await CLI.run(["layout", "decode", "--advertisement", LayoutCLITests.fixture("bad-advertisement.yaml"), "00"])
        #expect(bad.stderr.contains("(line 4)"), "\(bad.stderr)")
        let short = LayoutCLITests.fixture("soil-probe.yaml")
        try await CLI.expectOneLineFailure(["layout", "decode", "--advertisement", short, "502a"],
                                           mentioning: "need more data: field 'flags' at byte 2")
    }
}
