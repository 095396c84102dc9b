// Files the attachment tests hand to tabs: a real PNG (4×4, drawn here) and a real one-page PDF, both made
// byte for byte in this file (no fixture to trust), and a type no chat site takes.
import { deflateSync, crc32 } from 'node:zlib';

function chunk(type, data) {
  const len = Buffer.alloc(4); len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4); crc.writeUInt32BE(crc32(body) >>> 0);
  return Buffer.concat([len, body, crc]);
}

/** A 4×4 RGB PNG, a colour per row. */
export function pngBytes() {
  const w = 4; const h = 4;
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(h, 4); ihdr[8] = 8; ihdr[9] = 2; ihdr[10] = 0; ihdr[11] = 0; ihdr[12] = 0;
  const rows = [];
  const colours = [[230, 57, 70], [241, 250, 238], [69, 123, 157], [29, 53, 87]];
  for (let y = 0; y < h; y += 1) rows.push(Buffer.from([0, ...Array.from({ length: w }, () => colours[y]).flat()]));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr), chunk('IDAT', deflateSync(Buffer.concat(rows))), chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A one-page PDF saying `text` (ASCII), with a correct xref table. */
export function pdfBytes(text = 'AIcard attachment test') {
  const stream = `BT /F1 18 Tf 40 100 Td (${text}) Tj ET`;
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 400 200] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ];
  let out = '%PDF-1.4\n';
  const offsets = [];
  objects.forEach((o, i) => { offsets.push(out.length); out += `${i + 1} 0 obj\n${o}\nendobj\n`; });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((n) => `${String(n).padStart(10, '0')} 00000 n \n`).join('')}`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

export const PNG = { name: '图表 chart.png', mime: 'image/png', bytes: pngBytes() };
export const PDF = { name: 'report 报告.pdf', mime: 'application/pdf', bytes: pdfBytes() };
/** No chat site's composer takes this type. */
export const EXE = { name: 'setup.exe', mime: 'application/x-msdownload', bytes: Buffer.from('MZ\x90\x00not really a program', 'latin1') };
