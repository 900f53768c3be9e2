import { z } from 'zod';

// Placeholder: the mqtt source defines its section here (issue for the mqtt source).
export const mqttSectionSchema = z.strictObject({}).optional().meta({ description: 'mqtt source (not yet available)' });
export type MqttSection = z.output<typeof mqttSectionSchema>;
