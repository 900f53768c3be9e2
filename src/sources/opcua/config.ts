import { z } from 'zod';

// Placeholder: the opcua source defines its section here (issue for the opcua source).
export const opcuaSectionSchema = z.strictObject({}).optional().meta({ description: 'opcua source (not yet available)' });
export type OpcuaSection = z.output<typeof opcuaSectionSchema>;
