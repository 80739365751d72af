#!/usr/bin/env python3
"""The radio front-end: puts gatt2mqtt's simulated devices on a Bumble radio.

    python3 scripts/vm/radio.py --models PATH [--transport vhci|none] [--centrals N] [--control PATH] [--selftest]

`gatt2mqtt peripherals --socket PATH` serves the device models (Swift, the only truth of how a
device behaves); this script is a thin front-end (docs/bluez.md "The radio front-end"): for each
model one Bumble peripheral (its own Controller on a shared LocalLink, its own Host and Device,
public address = the model's) that advertises what the model says and serves a GATT table built
from the model's services. Reads, writes, subscriptions and link changes go to the model server;
the models' notifications come back and go out on the air.

--transport vhci attaches one more Controller on the link to /dev/vhci, so the kernel gets an
hci0 whose radio is this LocalLink (for bluetoothd in the test VM); --centrals 2 attaches two, hci0
and hci1, both on the same link (two central adapters of one bluetoothd that see and reach the
same peripherals). --selftest (with --transport none) runs a Bumble central on the link instead
and checks every device.

Prints "radio: ready" on stdout once every peripheral advertises (and the hci devices are
attached). Logs to stderr. Runs until SIGINT/SIGTERM or until the model server goes away.
"""

import argparse
import asyncio
import collections
import contextvars
import dataclasses
import json
import logging
import os
import signal
import sys

from bumble import att, hci
from bumble.controller import Controller
from bumble.core import PhysicalTransport
from bumble.device import AdvertisingType, Device, DeviceConfiguration, Peer
from bumble.gatt import (
    GATT_CLIENT_CHARACTERISTIC_CONFIGURATION_DESCRIPTOR,
    Characteristic,
    CharacteristicValue,
    Descriptor,
    Service,
)
from bumble.host import Host
from bumble.link import LocalLink
from bumble.pairing import PairingConfig, PairingDelegate
from bumble.transport.common import AsyncPipeSink

log = logging.getLogger("radio")

BASE_UUID_SUFFIX = "-0000-1000-8000-00805f9b34fb"

# Set while Bumble handles an ATT Write Command (write without response): the value callback
# cannot tell a command from a request otherwise.
WRITE_COMMAND = contextvars.ContextVar("write_command", default=False)

# AD types (Core Specification Supplement Part A §1).
AD_FLAGS = 0x01
AD_UUIDS_16 = 0x03
AD_UUIDS_128 = 0x07
AD_SHORT_NAME = 0x08
AD_NAME = 0x09
AD_SERVICE_DATA_16 = 0x16
AD_SERVICE_DATA_128 = 0x21
AD_MANUFACTURER = 0xFF
# LE General Discoverable, BR/EDR not supported.
FLAGS = bytes([0x06])
AD_LIMIT = 31


class ModelServerGone(Exception):
    pass


def short_uuid(uuid):
    """The 16-bit form ("fea6") of a Bluetooth Base UUID, else None."""
    if uuid.startswith("0000") and uuid.endswith(BASE_UUID_SUFFIX) and len(uuid) == 36:
        return uuid[4:8]
    return None


def bumble_uuid(uuid):
    from bumble.core import UUID

    return UUID(short_uuid(uuid) or uuid)


def uuid_bytes(uuid):
    """Little-endian bytes as in advertising data: 2 for a Base UUID, else 16."""
    short = short_uuid(uuid)
    if short:
        return bytes.fromhex(short)[::-1]
    return bytes.fromhex(uuid.replace("-", ""))[::-1]


def ad_structure(ad_type, data):
    return bytes([len(data) + 1, ad_type]) + data


def advertising_payloads(ad, data_first=False):
    """(advertising data, scan response) for a model's advertisement: flags first, then the
    UUID lists, manufacturer data, the name and service data, each in the advertisement when it
    fits in 31 bytes, else in the scan response; a name that fits nowhere is shortened. (A GoPro
    so puts flags, FEA6 and its manufacturer data in the advertisement and its name and FEA6
    service data in the scan response, as a camera does: gopro.md §10.) `data_first` (a passive
    sensor's): service data before the name, so the readings are in the advertisement itself."""
    items = []
    short = [u for u in ad.get("uuids", []) if short_uuid(u)]
    long = [u for u in ad.get("uuids", []) if not short_uuid(u)]
    if short:
        items.append(ad_structure(AD_UUIDS_16, b"".join(uuid_bytes(u) for u in short)))
    if long:
        items.append(ad_structure(AD_UUIDS_128, b"".join(uuid_bytes(u) for u in long)))
    for company, value in ad.get("manufacturer_data", {}).items():
        items.append(ad_structure(AD_MANUFACTURER, int(company).to_bytes(2, "little") + bytes.fromhex(value)))
    name = ad.get("name")
    name_at = len(items)
    for uuid, value in ad.get("service_data", {}).items():
        kind = AD_SERVICE_DATA_16 if short_uuid(uuid) else AD_SERVICE_DATA_128
        items.append(ad_structure(kind, uuid_bytes(uuid) + bytes.fromhex(value)))
    if name:
        items.insert(len(items) if data_first else name_at, ad_structure(AD_NAME, name.encode()))
    adv, rsp = ad_structure(AD_FLAGS, FLAGS), b""
    for item in items:
        if len(adv) + len(item) <= AD_LIMIT:
            adv += item
        elif len(rsp) + len(item) <= AD_LIMIT:
            rsp += item
        elif item[1] == AD_NAME:
            room = max(AD_LIMIT - len(rsp), AD_LIMIT - len(adv)) - 2
            if room > 0:
                shortened = ad_structure(AD_SHORT_NAME, name.encode()[:room])
                if len(adv) + len(shortened) <= AD_LIMIT:
                    adv += shortened
                else:
                    rsp += shortened
        else:
            log.warning("advertising data does not fit: %s dropped", item.hex())
    return adv, rsp


class Link(LocalLink):
    """A LocalLink whose LE data carries the address the sender's connection was made with.
    Bumble 0.0.236's LocalLink.send_acl_data names the sender by its controller's random
    address, so on a link made with public addresses (ours, and BlueZ's by default) the peer
    drops every ACL packet ("no connection for …")."""

    def send_acl_data(self, sender_controller, destination_address, transport, data):
        connection = sender_controller.le_connections.get(destination_address)
        if transport != PhysicalTransport.LE or connection is None:
            return super().send_acl_data(sender_controller, destination_address, transport, data)
        destination = self.find_le_controller(destination_address)
        if destination is not None:
            source = connection.self_address
            asyncio.get_running_loop().call_soon(lambda: destination.on_link_acl_data(source, transport, data))


# LE Meta subevent 0x0A, LE Enhanced Connection Complete: its bit in LE Set Event Mask.
LE_ENHANCED_CONNECTION_COMPLETE_MASK = 1 << (0x0A - 1)


class RadioController(Controller):
    """A Bumble Controller with what this radio needs from a scanner (Bumble 0.0.236's
    Controller.on_advertising_pdu reports the advertising data a second time as the scan
    response, so what did not fit in 31 bytes never reached a scanner, and reports RSSI -50 for
    everyone): a scanner's scan-response reports carry the advertiser's scan response data, and
    every report the RSSI of the advertiser's controller when it has one (`rssi`, the model's).

    And a new connection is reported as the Core Specification says (Vol 4, Part E 7.7.65.10):
    when the host unmasked LE Enhanced Connection Complete, only that event is sent. Bumble
    0.0.236 always sends the legacy LE Connection Complete although it claims LL Privacy and
    Extended Advertising; Linux (6.1, `hci_le_create_conn_sync`) then waits for the enhanced
    event in vain, cancels the connection it believes pending (LE Create Connection Cancel) a few
    seconds later, and from then on ignores every local disconnect of that link: the
    "half-open link" of docs/bluez.md. Only hci0, the kernel's controller, does it
    (`enhanced_connection_complete`; the peripherals' Bumble hosts take either event), and not
    with --legacy-connection-complete (a controller with that bug, for the test of the bridge's
    recovery)."""

    rssi = None
    enhanced_connection_complete = False
    # False for a passive sensor's controller (a model with "connectable": false): it advertises
    # ADV_SCAN_IND, and a central's LE Create Connection to it waits until cancelled.
    connectable = True

    def on_advertising_pdu(self, pdu):
        advertiser = self.link.find_le_controller(pdu.advertiser_address)
        if getattr(advertiser, "connectable", True):
            return super().on_advertising_pdu(pdu)
        # A non-connectable advertisement is reported but never answered with a connection
        # (Bumble 0.0.236 connects a pending LE Create Connection on any advertisement).
        pending, self.pending_le_connection = self.pending_le_connection, None
        try:
            super().on_advertising_pdu(pdu)
        finally:
            if self.pending_le_connection is None:
                self.pending_le_connection = pending

    def on_hci_le_create_connection_cancel_command(self, command):
        """Core spec Vol 4 Part E 7.8.13: a pending connection is cancelled and reported with LE
        (Enhanced) Connection Complete, status Unknown Connection Identifier (Bumble 0.0.236
        answers success and keeps it pending, so the next Create Connection was disallowed)."""
        pending, self.pending_le_connection = self.pending_le_connection, None
        result = super().on_hci_le_create_connection_cancel_command(command)
        if pending is not None:
            asyncio.get_running_loop().call_soon(self.send_hci_packet, hci.HCI_LE_Connection_Complete_Event(
                status=hci.HCI_ErrorCode.UNKNOWN_CONNECTION_IDENTIFIER_ERROR, connection_handle=0, role=hci.Role.CENTRAL,
                peer_address_type=getattr(pending, "peer_address_type", 0), peer_address=pending.peer_address, connection_interval=0,
                peripheral_latency=0, supervision_timeout=0, central_clock_accuracy=0))
        return result

    def send_hci_packet(self, packet):
        if isinstance(packet, (hci.HCI_LE_Extended_Advertising_Report_Event, hci.HCI_LE_Advertising_Report_Event)):
            packet = type(packet)([self.as_received(r) for r in packet.reports])
        elif (
            isinstance(packet, hci.HCI_LE_Connection_Complete_Event)
            and self.enhanced_connection_complete
            and self.le_event_mask & LE_ENHANCED_CONNECTION_COMPLETE_MASK
        ):
            packet = hci.HCI_LE_Enhanced_Connection_Complete_Event(
                status=packet.status,
                connection_handle=packet.connection_handle,
                role=packet.role,
                peer_address_type=packet.peer_address_type,
                peer_address=packet.peer_address,
                local_resolvable_private_address=hci.Address.ANY,
                peer_resolvable_private_address=hci.Address.ANY,
                connection_interval=packet.connection_interval,
                peripheral_latency=packet.peripheral_latency,
                supervision_timeout=packet.supervision_timeout,
                central_clock_accuracy=packet.central_clock_accuracy,
            )
        super().send_hci_packet(packet)

    def as_received(self, report):
        advertiser = self.link.find_le_controller(report.address)
        if advertiser is None:
            return report
        changes = {}
        if getattr(advertiser, "rssi", None) is not None:
            changes["rssi"] = advertiser.rssi
        if isinstance(report, hci.HCI_LE_Extended_Advertising_Report_Event.Report):
            scan_response = bool(report.event_type & hci.HCI_LE_Extended_Advertising_Report_Event.EventType.SCAN_RESPONSE)
        else:
            scan_response = report.event_type == hci.HCI_LE_Advertising_Report_Event.EventType.SCAN_RSP
        if scan_response:
            changes["data"] = scan_response_data(advertiser, report.address)
        if not getattr(advertiser, "connectable", True):  # ADV_SCAN_IND and its scan response
            if isinstance(report, hci.HCI_LE_Extended_Advertising_Report_Event.Report):
                kind = hci.HCI_LE_Extended_Advertising_Report_Event.EventType
                changes["event_type"] = kind.SCANNABLE_ADVERTISING | (kind.SCAN_RESPONSE if scan_response else 0)
            elif not scan_response:
                changes["event_type"] = hci.HCI_LE_Advertising_Report_Event.EventType.ADV_SCAN_IND
        return dataclasses.replace(report, **changes)


def scan_response_data(controller, address):
    """What `controller` answers a scan request to `address` with."""
    for advertising_set in controller.advertising_sets.values():
        if advertising_set.enabled and advertising_set.address == address:
            return bytes(advertising_set.scan_response_data)
    legacy = controller.le_legacy_advertiser
    if legacy.enabled and legacy.address == address:
        return bytes(legacy.scan_response_data)
    return b""


def central_address(base, index):
    """`base` (a public address) with `index` added to its last byte: F0:…:01, F0:…:02, …"""
    octets = base.split(":")
    octets[-1] = f"{(int(octets[-1], 16) + index) & 0xFF:02X}"
    return ":".join(octets)


def hci_devices():
    """The kernel's Bluetooth controllers now (hci0, hci1, …)."""
    try:
        return {name for name in os.listdir("/sys/class/bluetooth") if name.startswith("hci") and ":" not in name}
    except OSError:
        return set()


class ModelClient:
    """The connection to `gatt2mqtt peripherals` (newline JSON, docs/bluez.md)."""

    def __init__(self):
        self.reader = None
        self.writer = None
        self.next_id = 0
        self.pending = {}
        self.on_notify = None
        self.on_disconnect = None
        self.on_advertise = None
        self.closed = asyncio.get_running_loop().create_future()

    async def connect(self, path):
        self.reader, self.writer = await asyncio.open_unix_connection(path, limit=1 << 21)

    def send(self, op, **fields):
        """Sends a request without waiting (no id: no answer unless it fails)."""
        if self.writer is None or self.writer.is_closing():
            raise ModelServerGone()
        self.writer.write((json.dumps({"op": op, **fields}, separators=(",", ":")) + "\n").encode())

    async def request(self, op, **fields):
        """Sends a request with an id and returns its answer (RuntimeError for an error line)."""
        self.next_id += 1
        ident = self.next_id
        future = asyncio.get_running_loop().create_future()
        self.pending[ident] = future
        try:
            self.send(op, id=ident, **fields)  # written before any await: requests keep their order
            return await future
        finally:
            self.pending.pop(ident, None)

    async def run(self):
        try:
            while True:
                line = await self.reader.readline()
                if not line:
                    break
                try:
                    message = json.loads(line)
                except ValueError:
                    log.error("model server sent %r", line[:200])
                    continue
                self.dispatch(message)
        except (ConnectionError, asyncio.IncompleteReadError) as error:
            log.error("model server connection: %s", error)
        finally:
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(ModelServerGone())
            if not self.closed.done():
                self.closed.set_result(None)

    def dispatch(self, message):
        op = message.get("op")
        ident = message.get("id")
        if ident is not None and ident in self.pending:
            future = self.pending[ident]
            if future.done():
                return
            if op == "error":
                future.set_exception(RuntimeError(message.get("message")))
            else:
                future.set_result(message)
        elif op == "notify" and self.on_notify:
            self.on_notify(message["address"], message["uuid"], bytes.fromhex(message["value"]))
        elif op == "disconnect" and self.on_disconnect:
            self.on_disconnect(message["address"])
        elif op == "advertise" and self.on_advertise:
            self.on_advertise(message["address"], message["advertisement"])
        elif op == "error":
            log.warning("model server: %s", message.get("message"))
        elif op == "result" and ident is None and "value" in message:
            pass  # a read answered without id (not sent by this front-end)
        elif op == "result" and "att_error" in message:
            log.info("model answered a write command with ATT error 0x%02x", message["att_error"])


def flag_permissions(flags, operation):
    """Bumble permissions for reading or writing a characteristic with BlueZ-style flags:
    encrypt-X needs an encrypted link; encrypt-authenticated-X and secure-X an authenticated one
    (MITM, which Just Works cannot give)."""
    permissions = att.Attribute.Permissions(0)
    if any(f == operation or f.endswith("-" + operation) for f in flags):
        permissions |= att.Attribute.READABLE if operation == "read" else att.Attribute.WRITEABLE
    if f"encrypt-{operation}" in flags:
        permissions |= att.Attribute.READ_REQUIRES_ENCRYPTION if operation == "read" else att.Attribute.WRITE_REQUIRES_ENCRYPTION
    if f"encrypt-authenticated-{operation}" in flags or f"secure-{operation}" in flags:
        permissions |= (
            att.Attribute.READ_REQUIRES_ENCRYPTION | att.Attribute.READ_REQUIRES_AUTHENTICATION
            if operation == "read"
            else att.Attribute.WRITE_REQUIRES_ENCRYPTION | att.Attribute.WRITE_REQUIRES_AUTHENTICATION
        )
    return permissions


def flag_properties(flags):
    p = Characteristic.Properties(0)
    if any(f == "read" or f.endswith("-read") for f in flags):
        p |= Characteristic.Properties.READ
    if any(f == "write" or f.endswith("-write") for f in flags):
        p |= Characteristic.Properties.WRITE
    if "write-without-response" in flags:
        p |= Characteristic.Properties.WRITE_WITHOUT_RESPONSE
    if any(f == "notify" or f.endswith("-notify") for f in flags):
        p |= Characteristic.Properties.NOTIFY
    if any(f == "indicate" or f.endswith("-indicate") for f in flags):
        p |= Characteristic.Properties.INDICATE
    return p


class Peripheral:
    """One model on the air: a Bumble Controller + Host + Device with the model's address,
    advertising and GATT table."""

    def __init__(self, index, model, link, models):
        self.model = model
        self.address = model["address"]
        self.kind = model["kind"]
        self.models = models
        self.away = False
        self.connection = None
        self.advertising = False
        self.pairings = 0
        self.pairing_failures = 0
        self.connections = 0
        self.notifications = 0
        # Writes that reached the device, per characteristic UUID (tests check at-most-once),
        # and the last 100 values written to each, hex (to count one command among others).
        self.writes = {}
        self.written = {}
        self.controller = RadioController(f"{self.kind}-{self.address}", link=link, public_address=self.address)
        self.controller.rssi = int(model["advertisement"].get("rssi", -60))
        self.connectable = model.get("connectable", True) is not False
        self.controller.connectable = self.connectable
        self.advertisements = 0  # advertisement updates from the model (a passive sensor's readings)
        # The advertisements the model gave before its current one, newest last: a scanner may
        # still hear one of them while the new one goes on the air (the self-test's scan check).
        self.earlier_advertisements = collections.deque(maxlen=8)
        config = DeviceConfiguration()
        config.name = model["advertisement"].get("name") or self.kind
        # A static random address of our own; the device advertises and pairs with its public one.
        config.address = hci.Address(f"D0:00:00:00:{index >> 8:02X}:{index & 0xFF:02X}", hci.Address.RANDOM_DEVICE_ADDRESS)
        self.device = Device(config=config, host=Host(self.controller, AsyncPipeSink(self.controller)))
        self.device.gatt_server.max_mtu = max(23, int(model.get("mtu", 23)))
        self.device.pairing_config_factory = lambda connection: PairingConfig(
            sc=True,
            mitm=False,
            bonding=True,
            delegate=PairingDelegate(io_capability=PairingDelegate.NO_OUTPUT_NO_INPUT),
            identity_address_type=PairingConfig.AddressType.PUBLIC,
        )
        self.characteristics = {}  # model uuid → Bumble Characteristic
        self.uuid_of = {}  # Bumble Characteristic handle → model uuid (filled after power on)
        self.device.add_services([self.service(s) for s in model["services"]])
        self.adv_data, self.scan_response = advertising_payloads(model["advertisement"], data_first=not self.connectable)
        self.device.on("connection", self.on_connection)
        self.device.gatt_server.on("characteristic_subscription", self.on_subscription)
        server = self.device.gatt_server
        original = server.on_att_write_command

        def on_att_write_command(bearer, pdu):
            token = WRITE_COMMAND.set(True)
            try:
                return original(bearer, pdu)  # spawns its task now, in this context
            finally:
                WRITE_COMMAND.reset(token)

        server.on_att_write_command = on_att_write_command

    def service(self, s):
        characteristics = []
        for c in s["characteristics"]:
            flags = c["flags"]
            descriptors = []
            secure_cccd = [f for f in flags if f.endswith("-notify") or f.endswith("-indicate")]
            characteristic = Characteristic(
                bumble_uuid(c["uuid"]),
                flag_properties(flags),
                flag_permissions(flags, "read") | flag_permissions(flags, "write"),
                self.value(c["uuid"]),
                descriptors,
            )
            if secure_cccd:
                # encrypt-notify and the like: enabling notifications needs the link security
                # too, as on a camera that refuses the CCCD write of an unpaired phone.
                permissions = att.Attribute.READABLE | att.Attribute.WRITEABLE | att.Attribute.WRITE_REQUIRES_ENCRYPTION
                if any(f.startswith("encrypt-authenticated-") or f.startswith("secure-") for f in secure_cccd):
                    permissions |= att.Attribute.WRITE_REQUIRES_AUTHENTICATION
                descriptors.append(
                    Descriptor(
                        GATT_CLIENT_CHARACTERISTIC_CONFIGURATION_DESCRIPTOR,
                        permissions,
                        self.device.gatt_server.make_descriptor_value(characteristic),
                    )
                )
            self.characteristics[c["uuid"]] = characteristic
            characteristics.append(characteristic)
        return Service(bumble_uuid(s["uuid"]), characteristics, primary=s.get("primary", True))

    def value(self, uuid):
        async def read(connection):
            try:
                answer = await self.models.request("read", address=self.address, uuid=uuid)
            except RuntimeError as error:
                log.warning("%s read %s: %s", self.address, uuid, error)
                raise att.ATT_Error(att.ATT_UNLIKELY_ERROR_ERROR)
            if "att_error" in answer:
                raise att.ATT_Error(answer["att_error"])
            return bytes.fromhex(answer["value"])

        async def write(connection, value):
            self.writes[uuid] = self.writes.get(uuid, 0) + 1
            values = self.written.setdefault(uuid, [])
            values.append(value.hex())
            del values[:-100]
            if WRITE_COMMAND.get():
                self.models.send("write", address=self.address, uuid=uuid, value=value.hex(), response=False)
                return
            try:
                answer = await self.models.request("write", address=self.address, uuid=uuid, value=value.hex(), response=True)
            except RuntimeError as error:
                log.warning("%s write %s: %s", self.address, uuid, error)
                raise att.ATT_Error(att.ATT_UNLIKELY_ERROR_ERROR)
            if "att_error" in answer:
                raise att.ATT_Error(answer["att_error"])

        return CharacteristicValue(read=read, write=write)

    async def start(self):
        await self.device.power_on()
        self.uuid_of = {c.handle: uuid for uuid, c in self.characteristics.items()}
        await self.advertise()

    async def advertise(self):
        if self.away or self.connection is not None or self.advertising:
            return
        await self.device.start_advertising(
            advertising_type=(
                AdvertisingType.UNDIRECTED_CONNECTABLE_SCANNABLE if self.connectable else AdvertisingType.UNDIRECTED_SCANNABLE
            ),
            own_address_type=hci.OwnAddressType.PUBLIC,
            advertising_data=self.adv_data,
            scan_response_data=self.scan_response,
            advertising_interval_min=100,
            advertising_interval_max=100,
        )
        self.advertising = True
        log.info("%s %s advertising", self.kind, self.address)

    async def readvertise(self, advertisement):
        """The model's advertisement changed (a passive sensor's new reading): the new data goes
        on the air at once (the advertising set is made again with it)."""
        self.earlier_advertisements.append(self.model["advertisement"])
        self.model["advertisement"] = advertisement
        self.adv_data, self.scan_response = advertising_payloads(advertisement, data_first=not self.connectable)
        self.advertisements += 1
        if self.advertising:
            self.advertising = False
            await self.advertise()

    async def stop_advertising(self):
        if self.advertising:
            self.advertising = False
            await self.device.stop_advertising()

    def on_connection(self, connection):
        if connection.role != hci.Role.PERIPHERAL:
            return
        self.connection = connection
        self.connections += 1
        self.advertising = False  # a legacy connectable advertisement ends with the connection
        log.info("%s %s connected to %s", self.kind, self.address, connection.peer_address)
        self.models.send("link", address=self.address, up=True)
        connection.on("disconnection", lambda reason: self.on_disconnection(connection, reason))
        connection.on("pairing", lambda keys: self.on_pairing(connection))
        connection.on("pairing_failure", lambda reason: self.on_pairing_failure(reason))
        connection.on(
            "connection_encryption_change",
            lambda *args: log.info("%s encryption %s", self.address, "on" if connection.is_encrypted else "off"),
        )

    def on_pairing(self, connection):
        self.pairings += 1
        log.info("%s %s paired with %s (bonded)", self.kind, self.address, connection.peer_address)

    def on_pairing_failure(self, reason):
        self.pairing_failures += 1
        log.warning("%s %s pairing failed: %s", self.kind, self.address, reason)

    def on_disconnection(self, connection, reason):
        if self.connection is connection:
            self.connection = None
        log.info("%s %s disconnected (%s)", self.kind, self.address, hci.HCI_Constant.error_name(reason))
        try:
            self.models.send("link", address=self.address, up=False)
        except ModelServerGone:
            return
        asyncio.ensure_future(self.advertise())

    def on_subscription(self, bearer, characteristic, notify, indicate):
        uuid = self.uuid_of.get(characteristic.handle)
        if uuid is None:
            return
        log.info("%s %s %s %s", self.kind, self.address, uuid, "subscribed" if notify or indicate else "unsubscribed")
        self.models.send("subscribe", address=self.address, uuid=uuid, on=bool(notify or indicate))

    def notify(self, uuid, value, force=False):
        """Sends a notification (or indication) on every bearer whose CCCD enables it, or with
        `force` on the connection whatever its CCCD; returns how many went out. Values longer
        than ATT_MTU - 3 are cut, as Bumble's server does."""
        characteristic = self.characteristics.get(uuid)
        if characteristic is None:
            return 0
        server = self.device.gatt_server
        targets = []
        for bearer, cccds in list(server.subscribers.items()):
            cccd = cccds.get(characteristic.handle, b"\x00\x00")
            if cccd[0] & 0x01:
                targets.append((bearer, False))
            elif cccd[0] & 0x02:
                targets.append((bearer, True))
        if force and not targets and self.connection is not None:
            targets.append((self.connection, False))
        for bearer, indicate in targets:
            if indicate:
                asyncio.ensure_future(server.indicate_subscriber(bearer, characteristic, value, force=True))
            else:
                pdu = att.ATT_Handle_Value_Notification(
                    attribute_handle=characteristic.handle, attribute_value=value[: bearer.att_mtu - 3]
                )
                server.send_gatt_pdu(bearer, bytes(pdu))
            self.notifications += 1
        return len(targets)

    async def drop(self):
        if self.connection is None:
            return False
        await self.connection.disconnect()
        return True

    async def set_away(self, on):
        self.away = on
        if on:
            await self.stop_advertising()
            await self.drop()
        else:
            await self.advertise()

    async def status(self):
        keys = await self.device.keystore.get_all() if self.device.keystore else []
        c = self.connection
        return {
            "address": self.address,
            "kind": self.kind,
            "connected": c is not None,
            "peer": c.peer_address.to_string(False) if c else None,
            "encrypted": bool(c and c.is_encrypted),
            "advertising": self.advertising,
            "connectable": self.connectable,
            "advertisements": self.advertisements,
            "away": self.away,
            "connections": self.connections,
            "pairings": self.pairings,
            "pairing_failures": self.pairing_failures,
            "notifications": self.notifications,
            "writes": self.writes,
            "written": self.written,
            "bonds": [name for name, _ in keys],
        }


class Radio:
    def __init__(self, args):
        self.args = args
        self.link = Link()
        self.peripherals = {}
        self.models = None
        # The vhci transports of the kernel's controllers (hci0, hci1, …), and their addresses.
        self.vhcis = []
        self.central_addresses = []
        # A central of its own on the link that asks the host to pair (op pair_host), made on first use.
        self.intruder = None

    async def start(self):
        self.models = ModelClient()
        try:
            await self.models.connect(self.args.models)
        except OSError as error:
            raise OSError(f"cannot connect to the model server (gatt2mqtt peripherals) at {self.args.models}: {error.strerror}")
        self.models.on_notify = self.model_notified
        self.models.on_disconnect = self.model_disconnects
        self.models.on_advertise = self.model_advertises
        reader = asyncio.ensure_future(self.models.run())
        hello = await asyncio.wait_for(self.models.request("hello"), 10)
        for index, model in enumerate(hello["devices"], start=1):
            self.peripherals[model["address"]] = Peripheral(index, model, self.link, self.models)
        for p in self.peripherals.values():
            await p.start()
        if self.args.transport == "vhci":
            for index in range(self.args.centrals):
                await self.attach_central(index)
        return reader

    async def attach_central(self, index):
        """One more Controller on the link, attached to /dev/vhci: the kernel's next hci device.
        Opened one after the other, each waiting for its hciN, so the first is hci0, the second
        hci1 (the kernel registers the device while the vhci transport writes its first packet)."""
        from bumble.transport import open_transport

        address = central_address(self.args.central_address, index)
        before = hci_devices()
        try:
            transport = await open_transport("vhci")
        except OSError as error:
            raise OSError(f"cannot open /dev/vhci (needs the hci_vhci module, as in the test VM): {error.strerror}")
        self.vhcis.append(transport)
        self.central_addresses.append(address)
        central = RadioController(
            f"central-{index}",
            host_source=transport.source,
            host_sink=transport.sink,
            link=self.link,
            public_address=address,
        )
        central.enhanced_connection_complete = not self.args.legacy_connection_complete
        name = "?"
        for _ in range(100):
            new = sorted(hci_devices() - before)
            if new:
                name = new[0]
                break
            await asyncio.sleep(0.05)
        log.info(
            "central controller %s attached to /dev/vhci as %s%s",
            address,
            name,
            " (legacy LE Connection Complete)" if self.args.legacy_connection_complete else "",
        )

    def model_notified(self, address, uuid, value):
        p = self.peripherals.get(address)
        if p:
            p.notify(uuid, value)

    def model_advertises(self, address, advertisement):
        p = self.peripherals.get(address)
        if p:
            asyncio.ensure_future(p.readvertise(advertisement))

    def model_disconnects(self, address):
        p = self.peripherals.get(address)
        if p and p.connection is not None:
            log.info("%s %s drops its link (model)", p.kind, address)
            asyncio.ensure_future(p.drop())

    async def control(self, request):
        op = request.get("op")
        if op == "status":
            return {
                "op": "status",
                "central": self.central_addresses[0] if self.central_addresses else None,
                "centrals": self.central_addresses,
                "peripherals": [await p.status() for p in self.peripherals.values()],
            }
        if op == "pair_host":
            return await self.pair_host(request)
        if op not in ("drop", "away", "notify"):
            return {"op": "error", "message": f"unknown op {op!r}"}
        p = self.peripherals.get(str(request.get("address", "")).upper())
        if p is None:
            return {"op": "error", "message": f"no peripheral {request.get('address')!r}"}
        if op == "drop":
            return {"op": "ok", "dropped": await p.drop()}
        if op == "away":
            on = request.get("on")
            if not isinstance(on, bool):
                return {"op": "error", "message": "on must be true or false"}
            await p.set_away(on)
            return {"op": "ok"}
        if op == "notify":
            try:
                value = bytes.fromhex(request.get("value", ""))
            except ValueError:
                return {"op": "error", "message": "value must be hex"}
            uuid = str(request.get("uuid", "")).lower()
            if len(uuid) == 4:
                uuid = "0000" + uuid + BASE_UUID_SUFFIX
            if uuid not in p.characteristics:
                return {"op": "error", "message": f"{p.address} has no characteristic {uuid}"}
            return {"op": "ok", "sent": p.notify(uuid, value, force=bool(request.get("force", False)))}

    async def pair_host(self, request):
        """A nearby device of nobody's (public address `address`, default C0:FF:EE:00:00:66) acting
        as a central: it scans for a connectable advertiser on the link that is none of the models
        (the host's adapter, while something makes it advertise; `target` narrows it to one
        address), connects, and asks to pair (Just Works, LE Secure Connections, bonding), as a
        keyboard would. Answers what came of it."""
        address = str(request.get("address", "C0:FF:EE:00:00:66")).upper()
        target = request.get("target")
        if self.intruder is None:
            controller = RadioController(f"intruder-{address}", link=self.link, public_address=address)
            config = DeviceConfiguration()
            config.name = "intruder"
            config.address = hci.Address("D0:00:00:00:FF:66", hci.Address.RANDOM_DEVICE_ADDRESS)
            device = Device(config=config, host=Host(controller, AsyncPipeSink(controller)))
            device.pairing_config_factory = lambda connection: PairingConfig(
                sc=True,
                mitm=False,
                bonding=True,
                delegate=PairingDelegate(io_capability=PairingDelegate.NO_OUTPUT_NO_INPUT),
                identity_address_type=PairingConfig.AddressType.PUBLIC,
            )
            await device.power_on()
            self.intruder = device
        device = self.intruder
        found = asyncio.get_running_loop().create_future()

        def on_advertisement(adv):
            seen = adv.address.to_string(False).upper()
            if seen in self.peripherals or not adv.is_connectable:
                return
            if target and seen != str(target).upper():
                return
            if not found.done():
                found.set_result(adv.address)

        device.on("advertisement", on_advertisement)
        try:
            await device.start_scanning(active=False, own_address_type=hci.OwnAddressType.PUBLIC)
            peer = await asyncio.wait_for(found, 15)
        except asyncio.TimeoutError:
            return {"op": "ok", "connected": False, "paired": False, "error": "no connectable advertiser"}
        finally:
            device.remove_listener("advertisement", on_advertisement)
            await device.stop_scanning()
        answer = {"op": "ok", "peer": peer.to_string(False), "connected": False, "paired": False, "error": None}
        try:
            connection = await device.connect(peer, own_address_type=hci.OwnAddressType.PUBLIC, timeout=10)
        except Exception as error:
            answer["error"] = f"connect: {type(error).__name__}: {error}"
            return answer
        answer["connected"] = True
        log.info("intruder %s connected to %s, asks to pair", address, answer["peer"])
        try:
            await asyncio.wait_for(connection.pair(), 20)
            answer["paired"] = True
        except Exception as error:
            answer["error"] = f"{type(error).__name__}: {error}"
        log.info("intruder %s pairing with %s: %s", address, answer["peer"], "paired" if answer["paired"] else answer["error"])
        try:
            await asyncio.wait_for(connection.disconnect(), 5)
        except Exception:
            pass
        return answer

    async def serve_control(self, path):
        async def client(reader, writer):
            try:
                while line := await reader.readline():
                    try:
                        request = json.loads(line)
                        if not isinstance(request, dict):
                            raise ValueError("a request is a JSON object")
                        answer = await self.control(request)
                    except ValueError as error:
                        answer = {"op": "error", "message": str(error)}
                    except Exception as error:  # a fault request must not take the radio down
                        log.exception("control request failed")
                        answer = {"op": "error", "message": f"{type(error).__name__}: {error}"}
                    writer.write((json.dumps(answer) + "\n").encode())
                    await writer.drain()
            except ConnectionError:
                pass
            finally:
                writer.close()

        if os.path.exists(path):
            os.unlink(path)
        return await asyncio.start_unix_server(client, path)


# --- Self-test: a Bumble central on the same link -------------------------------------------


class Checks:
    def __init__(self):
        self.failed = 0

    def check(self, ok, text):
        print(f"selftest: {'ok  ' if ok else 'FAIL'} {text}", flush=True)
        if not ok:
            self.failed += 1
        return ok


GP = "b5f9{:04x}-aa8d-11e3-9046-0002a5d5c51b"


async def selftest(radio):
    checks = Checks()
    controller = RadioController("selftest-central", link=radio.link, public_address="F0:F0:F0:F0:F0:02")
    config = DeviceConfiguration()
    config.name = "selftest"
    config.address = hci.Address("D0:00:00:00:FF:02", hci.Address.RANDOM_DEVICE_ADDRESS)
    central = Device(config=config, host=Host(controller, AsyncPipeSink(controller)))
    await central.power_on()

    # Scan: every model is seen with what it advertises (scan response merged).
    seen = {}
    complete = asyncio.Event()

    def on_advertisement(adv):
        address = adv.address.to_string(False)
        if address in radio.peripherals and adv.address.is_public:
            seen[address] = adv
            if all(expected_ad_ok(radio.peripherals[a], seen.get(a)) for a in radio.peripherals):
                complete.set()

    central.on("advertisement", on_advertisement)
    await central.start_scanning(active=True, own_address_type=hci.OwnAddressType.PUBLIC)
    try:
        await asyncio.wait_for(complete.wait(), 10)
    except asyncio.TimeoutError:
        pass
    await central.stop_scanning()
    for address, p in radio.peripherals.items():
        ad = p.model["advertisement"]
        checks.check(
            expected_ad_ok(p, seen.get(address)),
            f"{p.kind} {address} advertises (rssi {ad.get('rssi')}) name {ad.get('name')!r}, uuids {[short_uuid(u) or u for u in ad['uuids']]}, "
            f"manufacturer data {ad['manufacturer_data']}, service data {ad['service_data']}",
        )

    for address, p in radio.peripherals.items():
        try:
            checker = {"gopro": gopro_checks, "hr": hr_checks, "rokid": rokid_checks, "thermo": thermo_checks}.get(p.kind)
            await (checker or advertiser_checks)(central, p, checks)
        except Exception as error:
            checks.check(False, f"{p.kind} {address}: {type(error).__name__}: {error}")
            log.exception("selftest %s", address)
    hr = next((p for p in radio.peripherals.values() if p.kind == "hr"), None)
    if hr:
        try:
            await control_checks(central, radio, hr, checks)
        except Exception as error:
            checks.check(False, f"control requests: {type(error).__name__}: {error}")
            log.exception("selftest control")
    # Polled until true (5 s at most): an advertiser that changes its payload restarts its
    # advertising, and one status read can fall in that gap (a loaded CI run did).
    deadline = asyncio.get_running_loop().time() + 5
    while True:
        status = await radio.control({"op": "status"})
        settled = all(s["advertising"] and not s["connected"] for s in status["peripherals"])
        if settled or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.1)
    checks.check(
        settled,
        "every peripheral advertises again after its central left"
        + ("" if settled else f": {[(s.get('address'), s['advertising'], s['connected']) for s in status['peripherals']]}"),
    )
    return checks.failed == 0


def expected_ad_ok(p, adv):
    """Whether `adv`, heard from peripheral `p`, is what its model advertises. A passive sensor's
    model steps to a new reading every --advertise-interval and its new data goes on the air a
    moment later (later still on a busy machine): one of its last few advertisements counts."""
    if adv is None:
        return False
    return any(ad_matches(ad, adv) for ad in [p.model["advertisement"], *reversed(p.earlier_advertisements)])


def ad_matches(ad, adv):
    if adv.rssi != ad.get("rssi", adv.rssi):
        return False
    data = {}
    for ad_type, value in adv.data.ad_structures:
        data.setdefault(int(ad_type), []).append(bytes(value) if not isinstance(value, bytes) else value)
    raw = {t: b"".join(v) for t, v in data.items()}
    if ad.get("name") and raw.get(AD_NAME, b"").decode(errors="replace") != ad["name"]:
        return False
    uuids16 = raw.get(AD_UUIDS_16, b"")
    uuids128 = raw.get(AD_UUIDS_128, b"")
    for u in ad.get("uuids", []):
        if uuid_bytes(u) not in (uuids16 if short_uuid(u) else uuids128):
            return False
    for company, value in ad.get("manufacturer_data", {}).items():
        want = int(company).to_bytes(2, "little") + bytes.fromhex(value)
        if want not in data.get(AD_MANUFACTURER, []):
            return False
    for uuid, value in ad.get("service_data", {}).items():
        kind = AD_SERVICE_DATA_16 if short_uuid(uuid) else AD_SERVICE_DATA_128
        if uuid_bytes(uuid) + bytes.fromhex(value) not in data.get(kind, []):
            return False
    return True


async def advertiser_checks(central, p, checks):
    """A passive sensor (a model with "connectable": false): its advertisements are not
    connectable, carry the model's changing data (two different payloads within 8 s: the
    model steps every --advertise-interval), and a connection attempt gets nothing."""
    payloads, kinds = set(), set()

    def on_advertisement(adv):
        if adv.address.to_string(False) != p.address:
            return
        kinds.add(adv.is_connectable)
        payloads.add(tuple(sorted((int(t), bytes(v)) for t, v in adv.data.ad_structures if int(t) in (AD_MANUFACTURER, AD_SERVICE_DATA_16))))

    central.on("advertisement", on_advertisement)
    await central.start_scanning(active=True, own_address_type=hci.OwnAddressType.PUBLIC)
    for _ in range(80):
        if len(payloads) >= 2:
            break
        await asyncio.sleep(0.1)
    await central.stop_scanning()
    central.remove_listener("advertisement", on_advertisement)
    checks.check(kinds == {False}, f"{p.kind} {p.address} advertises non-connectable (connectable seen: {sorted(kinds)})")
    checks.check(len(payloads) >= 2, f"{p.kind} {p.address} advertisement changes ({len(payloads)} payloads seen in 8 s)")
    try:
        await central.connect(hci.Address(p.address, hci.Address.PUBLIC_DEVICE_ADDRESS), own_address_type=hci.OwnAddressType.PUBLIC, timeout=2)
        checks.check(False, f"{p.kind} {p.address} a connection attempt fails (it connected)")
    except Exception as error:
        checks.check(p.connection is None, f"{p.kind} {p.address} a connection attempt fails ({type(error).__name__})")


async def connect(central, p):
    connection = await central.connect(
        hci.Address(p.address, hci.Address.PUBLIC_DEVICE_ADDRESS), own_address_type=hci.OwnAddressType.PUBLIC, timeout=10
    )
    peer = Peer(connection)
    await peer.request_mtu(517)
    await peer.discover_services()
    await peer.discover_characteristics()
    return connection, peer


def characteristic(peer, uuid):
    found = peer.get_characteristics_by_uuid(bumble_uuid(uuid))
    if not found:
        raise LookupError(f"no characteristic {uuid}")
    return found[0]


async def disconnect(connection, p):
    await connection.disconnect()
    for _ in range(100):
        if p.advertising:
            return
        await asyncio.sleep(0.05)


def gopro_payload(packet):
    """The message bytes of a GoPro start packet (gopro.md §1): after a general (5-bit length),
    extended 13-bit or extended 16-bit header."""
    kind = packet[0] >> 5 if packet else 3
    return packet[{0: 1, 1: 2, 2: 3}.get(kind, len(packet)):]


async def gopro_checks(central, p, checks):
    tag = f"gopro {p.address}"
    connection, peer = await connect(central, p)
    command = characteristic(peer, GP.format(0x72))
    response = characteristic(peer, GP.format(0x73))
    try:
        await peer.write_value(command, bytes([0x01, 0x3C]), with_response=True)
        checks.check(False, f"{tag} GP-0072 refuses an unencrypted write")
    except att.ATT_Error as error:
        checks.check(
            error.error_code in (att.ATT_INSUFFICIENT_ENCRYPTION_ERROR, att.ATT_INSUFFICIENT_AUTHENTICATION_ERROR),
            f"{tag} GP-0072 refuses an unencrypted write (ATT {error.error_name})",
        )
    await connection.pair()
    checks.check(p.pairings == 1 and connection.is_encrypted, f"{tag} pairs with Just Works, LE secure connections, bonding")
    notes = asyncio.Queue()
    await peer.subscribe(response, lambda value: notes.put_nowait(bytes(value)))
    # Get Hardware Info (0x3C): one general packet 01 3C; the simulated camera answers 3C 00 and
    # the hardware info, in several packets: the first is a start packet (13-bit length, 0x20).
    await peer.write_value(command, bytes([0x01, 0x3C]), with_response=True)
    answer = await asyncio.wait_for(notes.get(), 5)
    checks.check(hardware_info_start(answer), f"{tag} Get Hardware Info (01 3c on GP-0072) → {answer.hex(' ')} on GP-0073")
    await disconnect(connection, p)

    # Bonded: reconnect, encrypt with the stored keys, no second pairing.
    connection, peer = await connect(central, p)
    await connection.encrypt()
    command = characteristic(peer, GP.format(0x72))
    response = characteristic(peer, GP.format(0x73))
    notes = asyncio.Queue()
    await peer.subscribe(response, lambda value: notes.put_nowait(bytes(value)))
    await peer.write_value(command, bytes([0x01, 0x3C]), with_response=True)
    answer = await asyncio.wait_for(notes.get(), 5)
    checks.check(
        hardware_info_start(answer) and p.pairings == 1 and connection.is_encrypted,
        f"{tag} reconnects encrypted with the bond (no second pairing) and answers again",
    )
    await disconnect(connection, p)


def hardware_info_start(packet):
    """The first packet of a successful Get Hardware Info answer: a 13-bit-length start packet
    (header 001xxxxx) whose message begins with command 3C, status 00."""
    return len(packet) >= 4 and packet[0] & 0xE0 == 0x20 and packet[2:4] == bytes([0x3C, 0x00])


def model_value(p, short):
    """The initial value (hex) the model gives the characteristic with this 16-bit UUID."""
    return next(c["value"] for s in p.model["services"] for c in s["characteristics"] if short_uuid(c["uuid"]) == short)


async def hr_checks(central, p, checks):
    tag = f"hr {p.address}"
    connection, peer = await connect(central, p)
    battery = await peer.read_value(characteristic(peer, "2A19"))
    want = model_value(p, "2a19")
    checks.check(bytes(battery).hex() == want, f"{tag} Battery Level 2A19 reads {bytes(battery).hex()}")
    notes = asyncio.Queue()
    await peer.subscribe(characteristic(peer, "2A37"), lambda value: notes.put_nowait(bytes(value)))
    await peer.write_value(characteristic(peer, "2A39"), bytes([0x01]), with_response=True)
    measurement = await asyncio.wait_for(notes.get(), 5)
    checks.check(measurement[:1] == b"\x08", f"{tag} control point 01 → measurement {measurement.hex(' ')} on 2A37")
    try:
        await peer.write_value(characteristic(peer, "2A39"), bytes([0x02]), with_response=True)
        checks.check(False, f"{tag} control point 02 is refused")
    except att.ATT_Error as error:
        checks.check(error.error_code == 0x80, f"{tag} control point 02 is refused with the model's ATT error 0x{error.error_code:02x}")
    await disconnect(connection, p)


async def rokid_checks(central, p, checks):
    tag = f"rokid {p.address}"
    connection, peer = await connect(central, p)
    info = await peer.read_value(characteristic(peer, "9301"))
    want = model_value(p, "9301")
    checks.check(bytes(info).hex() == want, f"{tag} 0x9301 reads the model's {len(info)}-byte Caps record")
    await disconnect(connection, p)


async def thermo_checks(central, p, checks):
    tag = f"thermo {p.address}"
    connection, peer = await connect(central, p)
    # Reads answer the model's current reading: the initial value (21.50 °C, 45.00 %, 92 %) or
    # where its drift has taken it since.
    temperature = bytes(await peer.read_value(characteristic(peer, "2A6E")))
    centi = int.from_bytes(temperature, "little", signed=True)
    checks.check(len(temperature) == 2 and 1900 <= centi <= 2400, f"{tag} Temperature 2A6E reads {temperature.hex()} ({centi / 100} °C)")
    humidity = bytes(await peer.read_value(characteristic(peer, "2A6F")))
    centi = int.from_bytes(humidity, "little")
    checks.check(len(humidity) == 2 and 4000 <= centi <= 5500, f"{tag} Humidity 2A6F reads {humidity.hex()} ({centi / 100} %)")
    battery = bytes(await peer.read_value(characteristic(peer, "2A19")))
    checks.check(
        len(battery) == 1 and 5 <= battery[0] <= int(model_value(p, "2a19"), 16),
        f"{tag} Battery Level 2A19 reads {battery.hex()} (model {model_value(p, '2a19')})",
    )
    # The model takes a reading every --thermo-interval seconds and notifies the new temperature
    # (sint16, 0.01 °C, drifting 0.05 °C a step within 19–24 °C).
    notes = asyncio.Queue()
    await peer.subscribe(characteristic(peer, "2A6E"), lambda value: notes.put_nowait(bytes(value)))
    note = await asyncio.wait_for(notes.get(), 15)
    centi = int.from_bytes(note, "little", signed=True) if len(note) == 2 else None
    checks.check(
        centi is not None and 1900 <= centi <= 2400,
        f"{tag} notifies a new temperature on 2A6E: {note.hex()} ({centi / 100 if centi is not None else '?'} °C)",
    )
    await disconnect(connection, p)


async def control_checks(central, radio, p, checks):
    """The fault requests of --control, made in-process."""
    tag = f"control {p.address}"
    connection, peer = await connect(central, p)
    notes = asyncio.Queue()
    await peer.subscribe(characteristic(peer, "2A37"), lambda value: notes.put_nowait(bytes(value)))
    answer = await radio.control({"op": "notify", "address": p.address, "uuid": "2A37", "value": ""})
    note = await asyncio.wait_for(notes.get(), 5)
    checks.check(answer == {"op": "ok", "sent": 1} and note == b"", f"{tag} notify sends a zero-length notification")
    gone = asyncio.get_running_loop().create_future()
    connection.once("disconnection", lambda reason: gone.set_result(reason))
    answer = await radio.control({"op": "drop", "address": p.address})
    reason = await asyncio.wait_for(gone, 5)
    checks.check(answer == {"op": "ok", "dropped": True}, f"{tag} drop ends the link ({hci.HCI_Constant.error_name(reason)})")
    await disconnect_settled(p)
    answer = await radio.control({"op": "away", "address": p.address, "on": True})
    status = next(s for s in (await radio.control({"op": "status"}))["peripherals"] if s["address"] == p.address)
    seen = asyncio.Event()
    listener = central.on("advertisement", lambda adv: seen.set() if adv.address.to_string(False) == p.address else None)
    await central.start_scanning(active=True, own_address_type=hci.OwnAddressType.PUBLIC)
    try:
        await asyncio.wait_for(seen.wait(), 1)
    except asyncio.TimeoutError:
        pass
    checks.check(
        answer == {"op": "ok"} and not seen.is_set() and not status["advertising"] and status["away"],
        f"{tag} away stops advertising (nothing heard for 1 s)",
    )
    await radio.control({"op": "away", "address": p.address, "on": False})
    await asyncio.wait_for(seen.wait(), 5)
    await central.stop_scanning()
    central.remove_listener("advertisement", listener)
    checks.check(seen.is_set(), f"{tag} back: advertising again")


async def disconnect_settled(p):
    for _ in range(100):
        if p.connection is None and p.advertising:
            return
        await asyncio.sleep(0.05)


# --- Main --------------------------------------------------------------------------------------


async def main(args):
    radio = Radio(args)
    try:
        reader = await radio.start()
    except (OSError, ModelServerGone, asyncio.TimeoutError) as error:
        log.error("cannot start: %s", error)
        return 1
    control = await radio.serve_control(args.control) if args.control else None
    print("radio: ready", flush=True)
    try:
        if args.selftest:
            return 0 if await selftest(radio) else 1
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        gone = asyncio.ensure_future(radio.models.closed)
        waiting = asyncio.ensure_future(stop.wait())
        await asyncio.wait([gone, waiting], return_when=asyncio.FIRST_COMPLETED)
        if gone.done():
            log.error("model server went away")
            return 1
        return 0
    finally:
        if control:
            control.close()
            if os.path.exists(args.control):
                os.unlink(args.control)
        for transport in radio.vhcis:
            await transport.close()
        reader.cancel()


def parse(argv):
    parser = argparse.ArgumentParser(description="Bumble radio front-end for gatt2mqtt's simulated devices.")
    parser.add_argument("--models", required=True, help="the Unix socket of `gatt2mqtt peripherals`")
    parser.add_argument("--transport", choices=["vhci", "none"], default="vhci", help="attach a central controller to /dev/vhci (default) or not")
    parser.add_argument("--control", help="a Unix socket for fault requests (drop, away, notify, status)")
    parser.add_argument("--selftest", action="store_true", help="check every device with a Bumble central on the link, then exit 0 or 1")
    parser.add_argument("--central-address", default="F0:F0:F0:F0:F0:01", help="public address of the vhci controller (hci0)")
    parser.add_argument(
        "--centrals",
        type=int,
        default=1,
        help="how many vhci controllers to attach (hci0, hci1, …; default 1), all on the peripherals' link; "
        "the N-th (from 0) has --central-address plus N in its last byte",
    )
    parser.add_argument(
        "--legacy-connection-complete",
        action="store_true",
        help="hci0 reports connections with LE Connection Complete even when the host unmasked the enhanced event "
        "(a controller bug: Linux then leaves the link half-open after a local disconnect)",
    )
    parser.add_argument("--verbose", action="store_true", help="log Bumble's own debug output")
    args = parser.parse_args(argv)
    if args.selftest and args.transport != "none":
        parser.error("--selftest needs --transport none")
    if not 1 <= args.centrals <= 8:
        parser.error("--centrals takes 1 to 8")
    return args


if __name__ == "__main__":
    arguments = parse(sys.argv[1:])
    logging.basicConfig(
        level=logging.DEBUG if arguments.verbose else logging.INFO,
        format="radio: %(message)s" if not arguments.verbose else "%(asctime)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not arguments.verbose:
        logging.getLogger("bumble").setLevel(logging.WARNING)
    sys.exit(asyncio.run(main(arguments)))
