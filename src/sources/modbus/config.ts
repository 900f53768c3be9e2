import { z } from 'zod';

// Placeholder: the modbus source defines its section here (issue for the modbus source).
export const modbusSectionSchema = z.strictObject({}).optional().meta({ description: 'modbus source (not yet available)' });
export type ModbusSection = z.output<typeof modbusSectionSchema>;
