import { existsSync, linkSync, mkdirSync, unlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { getHostname, makeApplicationUrn, makeSubject, type OPCUACertificateManager } from 'node-opcua';

/**
 * How far the gateway's application instance certificate starts before the moment it is made.
 *
 * A server checks that our certificate's validity has begun by *its* clock (Part 4 §6.1.3,
 * "Validity Period", Bad_CertificateTimeInvalid). node-opcua would start it at the gateway's "now",
 * so a PLC whose clock is a few hours behind (a time-zone mistake is the usual cause) refuses a
 * freshly installed gateway: at the first connect if it checks strictly, at the second if it
 * trusted the certificate on first use. Starting it a week earlier covers time-zone and manual
 * clock errors; the key did not exist before, so the earlier start exposes nothing.
 */
export const OWN_CERTIFICATE_BACKDATE_DAYS = 7;
/** Same lifetime node-opcua gives a default client certificate (client_base_impl `createCertificate`). */
const VALIDITY_DAYS = 3650;

/** Where node-opcua looks for the client certificate of a manager (client_base_impl: `own/certs/client_certificate.pem`). */
export function ownCertificateFile(cm: OPCUACertificateManager): string {
  return join(cm.rootDir, 'own', 'certs', 'client_certificate.pem');
}

/**
 * Creates the gateway's application instance certificate if the PKI folder has none yet, with the
 * same subject, application URI and host name node-opcua would use, but back-dated. An existing
 * certificate is never replaced: servers already trust it.
 *
 * Written to a temporary file and hard-linked into place, so two sources (or a `browse`) sharing
 * the folder never see a half-written file and the first one to finish wins.
 */
export async function ensureOwnCertificate(cm: OPCUACertificateManager, applicationName: string, now: Date = new Date()): Promise<string> {
  const file = ownCertificateFile(cm);
  if (existsSync(file)) return file;
  mkdirSync(dirname(file), { recursive: true });
  const hostname = getHostname();
  const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    await cm.createSelfSignedCertificate({
      applicationUri: makeApplicationUrn(hostname, applicationName),
      subject: makeSubject(applicationName, hostname),
      dns: [hostname],
      startDate: new Date(now.getTime() - OWN_CERTIFICATE_BACKDATE_DAYS * 86_400_000),
      validity: VALIDITY_DAYS + OWN_CERTIFICATE_BACKDATE_DAYS,
      outputFile: tmp,
    });
    try {
      linkSync(tmp, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      // already gone
    }
  }
  return file;
}
