import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { OPCUACertificateManager } from 'node-opcua';

/** The validity period of a certificate, by its own dates. */
export interface CertificateValidity {
  subject: string;
  validFrom: Date;
  validTo: Date;
}

type VerifyArgs = Parameters<OPCUACertificateManager['verifyCertificate']>;
type VerifyResult = Awaited<ReturnType<OPCUACertificateManager['verifyCertificate']>>;

/**
 * The gateway's trust store for server certificates, tolerant of a server whose clock is ahead.
 *
 * A server makes its self-signed certificate by its own clock. If that clock is ahead of the
 * gateway's (3 hours, 2 days ...), the certificate's "not before" lies in the gateway's future for
 * that long, and node-opcua refuses it with BadCertificateTimeInvalid although the operator
 * trusted it (node-opcua-pki `#innerVerifyCertificateAsync`: `validity.notBefore > now` →
 * isTimeInvalid). With trust on first use it is worse: the first connect trusts it and works,
 * every later one (a reconnect after a PLC restart) fails.
 *
 * So a certificate that is *not yet valid* is accepted when it is otherwise trusted (in the trust
 * folder, or accepted on first use): OPC UA lets an application suppress validity-period errors
 * (Part 6 Annex E.6, CertificateValidationOptions.SuppressCertificateExpired), and a start date in
 * the future says "this server's clock is ahead", nothing about the key. Each such acceptance is
 * recorded so the source logs it (the audit entry E.6 asks for). An *expired* certificate is still
 * refused: that is a key past its end of life, whatever the clocks say.
 */
export class ClockTolerantCertificateManager extends OPCUACertificateManager {
  private acceptedEarly: CertificateValidity | null = null;
  private timeInvalid: CertificateValidity | null = null;

  override async verifyCertificate(certificate: VerifyArgs[0], options?: VerifyArgs[1]): Promise<VerifyResult> {
    const validity = certificateValidity(Array.isArray(certificate) ? certificate[0] : certificate);
    const status = await super.verifyCertificate(certificate, { ...options, acceptPendingCertificate: true });
    // Recorded whatever the verdict (an unknown certificate is "Untrusted" here, then trusted on
    // first use by the caller); the source reports it only after a connect succeeded with it.
    if (validity && validity.validFrom.getTime() > Date.now()) this.acceptedEarly = validity;
    if (/TimeInvalid/.test(String(status))) this.timeInvalid = validity;
    return status;
  }

  /** The server certificate last checked whose validity had not begun yet; cleared by reading. */
  takeAcceptedEarly(): CertificateValidity | null {
    const v = this.acceptedEarly;
    this.acceptedEarly = null;
    return v;
  }

  /** The server certificate last refused for its validity period (expired), for the error message. */
  lastTimeInvalid(): CertificateValidity | null {
    return this.timeInvalid;
  }
}

/** Dates of a DER certificate, or of the first certificate of a DER chain; null when unreadable. */
export function certificateValidity(der: Buffer | undefined): CertificateValidity | null {
  if (!der || der.length < 4) return null;
  try {
    const x = new X509Certificate(firstDer(der));
    const validFrom = new Date(Date.parse(x.validFrom));
    const validTo = new Date(Date.parse(x.validTo));
    if (!Number.isFinite(validFrom.getTime()) || !Number.isFinite(validTo.getTime())) return null;
    return { subject: x.subject.replace(/\n/g, ', '), validFrom, validTo };
  } catch {
    return null;
  }
}

/** Dates of a PEM or DER certificate file; null when missing or unreadable. */
export function certificateFileValidity(file: string): CertificateValidity | null {
  try {
    const content = readFileSync(file);
    const pem = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(content.toString('latin1'));
    return certificateValidity(pem ? new X509Certificate(pem[0]).raw : content);
  } catch {
    return null;
  }
}

/** A chain is DER certificates back to back; the first one's length is in its SEQUENCE header. */
function firstDer(der: Buffer): Buffer {
  if (der[0] !== 0x30) return der;
  const b = der[1];
  if (b < 0x80) return der.subarray(0, 2 + b);
  const n = b & 0x7f;
  let len = 0;
  for (let i = 0; i < n; i++) len = len * 256 + der[2 + i];
  return der.subarray(0, Math.min(der.length, 2 + n + len));
}
