import { z } from 'zod';
import { durationMs } from '../../config/units.js';
import { machineVariableId, scaleOffset, sourceName, unitSetting } from '../common-schema.js';
import { TABLES } from './address.js';
import { BYTE_ORDERS, DATA_TYPES } from './decode.js';
import { planSection } from './plan.js';

/**
 * The `modbus:` section. This schema is the reference documentation of every setting (README.md in
 * this folder shows them in use). Problems that involve several settings (overlapping registers,
 * a value longer than one request, a serial port shared with different settings) are checked by
 * `planSection` and reported here with the path of the setting at fault, so `edge-gateway check`
 * names them before anything starts.
 */

const registerSchema = z
  .strictObject({
    variable: machineVariableId,
    table: z
      .enum(TABLES)
      .optional()
      .meta({
        description:
          'Data table: coil (FC1), discrete_input (FC2), holding (FC3) or input (FC4). May be left out when address is a Modicon reference ("40001"), which names the table itself',
        examples: ['holding'],
      }),
    address: z
      .union([z.number(), z.string()])
      .meta({
        description:
          'Address of the (first) register or bit. A number is read with the device\'s address_base (0: protocol address 0-65535; 1: register number 1-65536). "0x0064" is hexadecimal with the same base. A quoted 5- or 6-digit Modicon reference ("40001", "300101") names the table and is always 1-based',
        examples: [100, '0x0064', '40101'],
      }),
    type: z
      .enum(DATA_TYPES)
      .optional()
      .meta({
        description:
          'Value type. Coils and discrete inputs: bool only (the default there). Registers: bool (any bit set), bit (one bit, see `bit`), int16, uint16 (default), int32, uint32, float32 (2 registers), int64, uint64, float64 (4 registers)',
        examples: ['float32'],
      }),
    bit: z
      .number()
      .int()
      .min(0)
      .max(15)
      .optional()
      .meta({ description: 'For type bit: which bit of the 16-bit register, 0 = least significant (after byte_order is applied)', examples: [3] }),
    byte_order: z
      .enum(BYTE_ORDERS)
      .optional()
      .meta({
        description:
          'Byte order of a register value; defaults to the device\'s byte_order. ABCD big-endian, DCBA little-endian, BADC big-endian with bytes swapped in each register, CDAB registers in reverse order ("word swap"). For 64-bit values the same patterns extend to ABCDEFGH, HGFEDCBA, BADCFEHG, GHEFCDAB',
        examples: ['CDAB'],
      }),
    ...scaleOffset,
    unit: unitSetting,
  })
  .meta({ description: 'One value read from the device and stored under a machine variable: engineering value = raw × scale + offset' });

const serialSchema = z
  .strictObject({
    path: z.string().min(1).meta({ description: 'Serial device path', examples: ['/dev/ttyUSB0', '/dev/serial/by-id/usb-FTDI_FT232R-if00-port0'] }),
    baud_rate: z
      .number()
      .int()
      .min(300)
      .max(921_600)
      .default(19_200)
      .meta({ description: 'Bits per second. 19200 is the default of the Modbus serial line specification (§2.5.1); many devices ship with 9600', examples: [9600] }),
    parity: z
      .enum(['none', 'even', 'odd', 'mark', 'space'])
      .default('even')
      .meta({ description: 'Parity. even is the default of the Modbus serial line specification (§2.5.1)', examples: ['none'] }),
    data_bits: z.union([z.literal(7), z.literal(8)]).default(8).meta({ description: 'Data bits (RTU framing uses 8)', examples: [8] }),
    stop_bits: z.union([z.literal(1), z.literal(2)]).default(1).meta({ description: 'Stop bits (the specification asks for 2 when parity is none)', examples: [1] }),
  })
  .meta({ description: 'Serial port settings (transport rtu). Devices on the same port share one connection and must use the same settings' });

const deviceSchema = z
  .strictObject({
    name: sourceName.meta({ description: 'Device name: appears in logs, status and the `device` metric label; unique within the section', examples: ['mixer1'] }),
    transport: z
      .enum(['tcp', 'rtu', 'rtu_over_tcp'])
      .default('tcp')
      .meta({ description: 'tcp: Modbus TCP (MBAP header). rtu: RTU frames on a serial port. rtu_over_tcp: RTU frames through a TCP serial device server', examples: ['tcp'] }),
    host: z.string().min(1).optional().meta({ description: 'Host name or IP address (tcp, rtu_over_tcp)', examples: ['192.168.10.21'] }),
    port: z.number().int().min(1).max(65_535).default(502).meta({ description: 'TCP port (tcp, rtu_over_tcp)', examples: [502] }),
    serial: serialSchema.optional(),
    unit_id: z
      .number()
      .int()
      .min(0)
      .max(255)
      .default(1)
      .meta({ description: 'Unit identifier (slave address). Serial buses use 1-247; Modbus TCP devices usually accept 1 or 255; a TCP gateway routes by it', examples: [1] }),
    poll_interval: durationMs({ min: 10, max: 3_600_000 }).default(1_000).meta({ description: 'Read every value this often', examples: ['1s', '100ms'] }),
    timeout: durationMs({ min: 10, max: 60_000 }).default(1_000).meta({ description: 'How long to wait for each response', examples: ['500ms'] }),
    retries: z.number().int().min(0).max(10).default(1).meta({ description: 'Extra attempts for a request that timed out, got a damaged frame or a busy answer, before the device is treated as offline', examples: [1] }),
    address_base: z
      .union([z.literal(0), z.literal(1)])
      .default(0)
      .meta({ description: '0: numeric addresses are protocol addresses (first register is 0). 1: numeric addresses are 1-based register numbers as many manuals print them (first register is 1)', examples: [0] }),
    byte_order: z.enum(BYTE_ORDERS).default('ABCD').meta({ description: 'Default byte_order for this device\'s registers', examples: ['ABCD'] }),
    max_gap: z
      .number()
      .int()
      .min(0)
      .max(124)
      .default(10)
      .meta({ description: 'Registers of the same table closer than this many unused addresses are read in one request (the unused ones are read and ignored). 0 joins only adjacent ones', examples: [10] }),
    max_bit_gap: z.number().int().min(0).max(1_999).default(100).meta({ description: 'Same as max_gap, for coils and discrete inputs', examples: [100] }),
    max_registers_per_request: z
      .number()
      .int()
      .min(1)
      .max(125)
      .default(125)
      .meta({ description: 'Largest number of registers asked for in one request (the protocol allows 125, §6.3). Lower it for devices that refuse long reads', examples: [125, 32] }),
    max_bits_per_request: z
      .number()
      .int()
      .min(1)
      .max(2_000)
      .default(2_000)
      .meta({ description: 'Largest number of coils or discrete inputs asked for in one request (the protocol allows 2000, §6.1)', examples: [2000] }),
    quirks: z
      .strictObject({
        request_delay: durationMs({ min: 0, max: 10_000 })
          .default(0)
          .meta({ description: 'Pause before each request on this connection, for slow serial devices and gateways that drop back-to-back requests', examples: ['20ms'] }),
        split_on_illegal_address: z
          .boolean()
          .default(true)
          .meta({ description: 'When a joined read is answered "illegal data address", read its values one by one from then on so only the bad address is lost (else the whole block is lost each cycle)', examples: [true] }),
      })
      .prefault({})
      .meta({ description: 'Workarounds for devices that bend the protocol' }),
    registers: z.array(registerSchema).min(1).meta({ description: 'Values to read' }),
  })
  .meta({ description: 'One Modbus device (one unit id at one address or on one serial port)' });

export const modbusSectionSchema = z
  .strictObject({
    name: sourceName.default('modbus').meta({ description: 'Source name in status, logs and the `source` metric label', examples: ['modbus'] }),
    reconnect: z
      .strictObject({
        initial_delay: durationMs({ min: 100, max: 600_000 }).default(1_000).meta({ description: 'Wait before the first reconnect attempt (or retry of an offline device)', examples: ['1s'] }),
        max_delay: durationMs({ min: 100, max: 3_600_000 }).default(30_000).meta({ description: 'Longest wait between attempts; the wait doubles up to it', examples: ['30s'] }),
      })
      .prefault({})
      .meta({ description: 'Backoff for lost connections and devices that stop answering' }),
    devices: z.array(deviceSchema).min(1).meta({ description: 'Devices to poll; each runs its own loop so a slow or offline device does not delay the others' }),
  })
  .superRefine((section, ctx) => {
    // zod may run this after non-fatal issues elsewhere in the section; planning a half-valid
    // section must not turn into a crash instead of the messages already collected.
    let problems;
    try {
      problems = planSection(section).problems;
    } catch {
      return;
    }
    for (const p of problems) ctx.addIssue({ code: 'custom', message: p.message, path: p.path, input: undefined });
  })
  .optional()
  .meta({ description: 'Modbus TCP / RTU source' });

export type ModbusSection = z.output<typeof modbusSectionSchema>;
export type ModbusSectionConfig = NonNullable<ModbusSection>;
export type ModbusDeviceConfig = ModbusSectionConfig['devices'][number];
export type ModbusRegisterConfig = ModbusDeviceConfig['registers'][number];
export type ModbusSerialConfig = NonNullable<ModbusDeviceConfig['serial']>;
