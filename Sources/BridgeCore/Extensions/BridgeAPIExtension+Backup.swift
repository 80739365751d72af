import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation

// `bridge/request/backup` (docs/bridge-api.md "backup"): what the bridge keeps, in one zip as
// zigbee2mqtt's backup is — `{"data":{"zip":"<base64>"}}`.

extension BridgeAPIExtension {
    /// The largest database copy, and configuration file, a backup takes (a larger one is
    /// refused, with the size and the limit: copy the file by hand then).
    static let backupLimit = 32 << 20

    /// The archive's entries: `gatt2mqtt.sqlite` (a consistent copy of the state database, made
    /// with SQLite's online backup API), `runtime_devices.json` (the devices added over MQTT, as
    /// `devices[]` entries), `options.json` (those set by `options`), and the configuration file
    /// as it is on disk (`configuration.yaml`; it holds no password: those are in files or the
    /// environment, which are not included).
    func backupArchive() throws(RequestError) -> [UInt8] {
        var entries: [(name: String, data: [UInt8])] = []
        do {
            entries.append(("gatt2mqtt.sqlite", try store.backup(limit: Self.backupLimit)))
            let runtime = try store.runtimeDevices().map { (try? JSONValue(parsing: $0.config)) ?? .string($0.config) }
            entries.append(("runtime_devices.json", Array(JSONValue.array(runtime).jsonText.utf8)))
            let options = JSONObject(try store.options().map { (key: $0.key, value: (try? JSONValue(parsing: $0.value)) ?? .string($0.value)) })
            entries.append(("options.json", Array(JSONValue.object(options).jsonText.utf8)))
        } catch {
            throw RequestError("backup: \(error)")
        }
        if let read = control.readConfigurationFile {
            do { entries.append(("configuration.yaml", try read(Self.backupLimit))) } catch { throw RequestError("backup: \(error)") }
        }
        let now = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC") ?? .current, from: Date())
        let date = StoredZip.DOSDate(year: now.year ?? 1980, month: now.month ?? 1, day: now.day ?? 1,
                                     hour: now.hour ?? 0, minute: now.minute ?? 0, second: now.second ?? 0)
        do { return try StoredZip.archive(entries, date: date) } catch { throw RequestError("backup: \(error)") }
    }

    func backup(_ reply: Reply) {
        do throws(RequestError) {
            let zip = try backupArchive()
            logger.notice("backup made", metadata: ["bytes": "\(zip.count)"])
            reply.ok(["zip": .string(Data(zip).base64EncodedString())])
        } catch {
            reply.error(error.message, code: error.code)
        }
    }
}
