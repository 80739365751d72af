import BridgeConfig
import Testing

/// `frontend:` (docs/frontend.md): off unless configured; the environment overrides.
@Suite struct FrontendConfigTests {
    @Test func offByDefaultOnWhenConfigured() throws {
        #expect(try Configuration(yaml: "").frontend == nil)
        #expect(try Configuration(yaml: "frontend: {}").frontend == FrontendSettings(host: "127.0.0.1", port: 8080))
        let c = try Configuration(yaml: "frontend:\n  listen: 0.0.0.0:8081\n  auth_token_file: /etc/gatt2mqtt/token\n")
        #expect(c.frontend == FrontendSettings(host: "0.0.0.0", port: 8081, authTokenFile: "/etc/gatt2mqtt/token"))
        #expect(c.frontend?.listen == "0.0.0.0:8081")
        #expect(try Configuration(yaml: "frontend: {listen: \"[::1]:8080\"}").frontend?.listen == "[::1]:8080")
    }

    @Test func errorsNameTheKey() {
        #expect(throws: ConfigError(path: "frontend.listen", line: 1,
                                    message: "'8080' is not HOST:PORT with an IP address and a port 1…65535 (e.g. 127.0.0.1:8080, [::1]:8080, 0.0.0.0:8080)")) {
            try Configuration(yaml: "frontend: {listen: \"8080\"}")
        }
        #expect(throws: ConfigError.self) { try Configuration(yaml: "frontend: {token: abc}") }
        #expect(throws: ConfigError.self) { try Configuration(yaml: "frontend: {auth_token_file: \"\"}") }
    }

    /// GATT2MQTT_FRONTEND_LISTEN turns it on (or moves it); empty turns it off.
    @Test func fromTheEnvironment() throws {
        let on = try Configuration(yaml: "", environment: ["GATT2MQTT_FRONTEND_LISTEN": "127.0.0.1:9000",
                                                          "GATT2MQTT_FRONTEND_AUTH_TOKEN_FILE": "/run/token"])
        #expect(on.frontend == FrontendSettings(host: "127.0.0.1", port: 9000, authTokenFile: "/run/token"))
        let off = try Configuration(yaml: "frontend: {listen: \"127.0.0.1:8080\"}", environment: ["GATT2MQTT_FRONTEND_LISTEN": ""])
        #expect(off.frontend == nil)
        #expect(throws: ConfigError.self) { try Configuration(yaml: "", environment: ["GATT2MQTT_FRONTEND_LISTEN": "nowhere"]) }
    }

    /// Beyond loopback without a token the frontend would be open to the network: refused,
    /// unless `allow_unauthenticated: true` says so.
    @Test func beyondLoopbackNeedsATokenOrAnExplicitOpening() throws {
        for listen in ["0.0.0.0:8080", "192.168.1.20:8080", "[::]:8080"] {
            #expect {
                try Configuration(yaml: "frontend: {listen: \"\(listen)\"}")
            } throws: { error in
                guard let e = error as? ConfigError else { return false }
                return e.path == "frontend.auth_token_file" && e.message.contains("frontend.allow_unauthenticated: true")
                    && e.message.contains("is reachable beyond this machine")
            }
        }
        #expect(throws: ConfigError.self) { try Configuration(yaml: "", environment: ["GATT2MQTT_FRONTEND_LISTEN": "0.0.0.0:8080"]) }
        let open = try Configuration(yaml: "frontend: {listen: \"0.0.0.0:8080\", allow_unauthenticated: true}")
        #expect(open.frontend == FrontendSettings(host: "0.0.0.0", port: 8080, allowUnauthenticated: true))
        let fromEnvironment = try Configuration(yaml: "", environment: ["GATT2MQTT_FRONTEND_LISTEN": "0.0.0.0:8080",
                                                                       "GATT2MQTT_FRONTEND_ALLOW_UNAUTHENTICATED": "true"])
        #expect(fromEnvironment.frontend?.allowUnauthenticated == true)
        #expect(try Configuration(yaml: "frontend: {listen: \"127.0.0.2:8080\"}").frontend?.isLoopback == true)
        #expect(try Configuration(yaml: "frontend: {listen: \"[::1]:8080\"}").frontend?.isLoopback == true)
    }

    @Test func allowedHosts() throws {
        let c = try Configuration(yaml: "frontend: {allowed_hosts: [Bridge.Example, 192.168.1.20, \"[fd00::1]\"]}\nmetrics: {allowed_hosts: [bridge.example]}")
        #expect(c.frontend?.allowedHosts == ["bridge.example", "192.168.1.20", "[fd00::1]"])
        #expect(c.metrics?.allowedHosts == ["bridge.example"])
        let e = try Configuration(yaml: "", environment: ["GATT2MQTT_FRONTEND_LISTEN": "127.0.0.1:8080", "GATT2MQTT_FRONTEND_ALLOWED_HOSTS": "a.example, b.example"])
        #expect(e.frontend?.allowedHosts == ["a.example", "b.example"])
        #expect(throws: ConfigError(path: "frontend.allowed_hosts[0]", line: 1,
                                    message: "'http://bridge.example:8080' is not a host name or IP address (no scheme, port or path: e.g. bridge.example, 192.168.1.20)")) {
            try Configuration(yaml: "frontend: {allowed_hosts: [\"http://bridge.example:8080\"]}")
        }
        #expect(throws: ConfigError.self) { try Configuration(yaml: "frontend: {allowed_hosts: bridge.example}") }
    }

    /// `frontend.url`: where users reach the frontend (Home Assistant's `configuration_url`);
    /// by default the listen address, unless that is a wildcard.
    @Test func urlIsWhereUsersReachIt() throws {
        let c = try Configuration(yaml: "frontend:\n  listen: 0.0.0.0:8080\n  allow_unauthenticated: true\n  url: https://gw.example/gatt2mqtt\n")
        #expect(c.frontend?.url == "https://gw.example/gatt2mqtt" && c.frontend?.address == "https://gw.example/gatt2mqtt")
        #expect(try Configuration(yaml: "frontend: {}").frontend?.address == "http://127.0.0.1:8080")
        #expect(try Configuration(yaml: "frontend: {listen: \"[::1]:9000\"}").frontend?.address == "http://[::1]:9000")
        #expect(try Configuration(yaml: "frontend: {listen: \"0.0.0.0:8080\", allow_unauthenticated: true}").frontend?.address == nil)
        #expect(try Configuration(yaml: "frontend: {listen: \"[::]:8080\", allow_unauthenticated: true}").frontend?.address == nil)
        let e = try Configuration(yaml: "frontend: {}", environment: ["GATT2MQTT_FRONTEND_URL": "http://bridge.lan:8080/"])
        #expect(e.frontend?.address == "http://bridge.lan:8080/")
    }

    @Test func urlErrorsNameTheKeyAndLine() {
        let message = { (v: String) in "'\(v)' is not an http or https URL with a host (e.g. http://gatt2mqtt.lan:8080, https://home.example/gatt2mqtt)" }
        for bad in ["gw.example:8080", "ftp://gw.example/", "http://", "http://user:secret@gw.example/", "http://gw example/"] {
            #expect(throws: ConfigError(path: "frontend.url", line: 3, message: message(bad)), "\(bad)") {
                try Configuration(yaml: "frontend:\n  listen: 127.0.0.1:8080\n  url: \"\(bad)\"\n")
            }
        }
        #expect(throws: ConfigError(path: "frontend.url (from GATT2MQTT_FRONTEND_URL)", line: nil, message: message("bridge.lan"))) {
            try Configuration(yaml: "frontend: {}", environment: ["GATT2MQTT_FRONTEND_URL": "bridge.lan"])
        }
    }
}
