// Loads the router's live dashboard in headless Chromium and checks that what it renders
// moves with the traffic: two reads some seconds apart, rates above zero, counts growing,
// the source and the sink listed. Takes a screenshot. Run by scripts/test-dashboard.sh:
//
//   node check.mjs URL TOKEN SCREENSHOT
//
// Exits non-zero (with what it saw) on any failed check.
import { chromium } from "playwright-core";

const [url, token, screenshot] = process.argv.slice(2);
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const fail = (what, seen) => {
  console.error(`dashboard check failed: ${what}\n${JSON.stringify(seen, null, 2)}`);
  process.exit(1);
};

const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });

  // Without the token, the page says so (the JSON endpoints answer 401).
  await page.goto(url);
  await page.waitForFunction(
    () => document.getElementById("state").textContent.includes("token needed"),
    null, { timeout: 15000 });

  // With it (in the fragment, which the browser never sends), it goes live.
  await page.goto(`${url}#token=${encodeURIComponent(token)}`);
  await page.reload();
  await page.waitForFunction(() => document.getElementById("state").className === "ok",
    null, { timeout: 15000 });

  const read = () => page.evaluate(() => {
    const num = (id) => Number(document.getElementById(id).textContent.replace(/,/g, ""));
    const rows = (id) => [...document.querySelectorAll(`#${id} tbody tr`)]
      .map((tr) => [...tr.children].map((td) => td.textContent));
    return {
      state: document.getElementById("state").textContent,
      rateIn: num("rate-in"), rateOut: num("rate-out"),
      framesIn: num("frames-in"), framesOut: num("frames-out"),
      connections: num("connections"),
      tags: rows("tags"), conns: rows("conns"), ledger: rows("ledger"),
      process: rows("process"),
    };
  });
  // Traffic is flowing and a rate window has passed.
  await page.waitForFunction(() => Number(document.getElementById("rate-in").textContent.replace(/,/g, "")) > 0,
    null, { timeout: 20000 });
  const first = await read();
  await page.waitForTimeout(3000);
  const second = await read();
  const seen = { first, second };

  if (!(second.framesIn > first.framesIn)) fail("frames in did not increase", seen);
  if (!(second.framesOut > first.framesOut)) fail("frames out did not increase", seen);
  if (!(second.rateIn > 0 && second.rateOut > 0)) fail("rates are not above zero", seen);
  if (second.connections < 2) fail("fewer than 2 connections shown", seen);
  const tag = second.tags.find((r) => r[0] === "0x10");
  if (!tag) fail("tag 0x10 not listed", seen);
  const firstTag = first.tags.find((r) => r[0] === "0x10");
  if (!(Number(tag[5].replace(/,/g, "")) > Number(firstTag[5].replace(/,/g, ""))))
    fail("tag 0x10's frames in did not increase", seen);
  const kinds = second.conns.map((r) => r[2]);
  if (!kinds.includes("source") || !kinds.includes("sink")) fail("source and sink not both listed", seen);
  const unaccounted = second.ledger.find((r) => r[0] === "unaccounted");
  if (!unaccounted) fail("the ledger's unaccounted row is missing", seen);

  // The binary's build info, when the script knows the commit it was built from.
  const git = process.env.Y3_EXPECT_GIT;
  const version = await page.evaluate(() => document.getElementById("version").textContent);
  if (git && !version.includes(`(${git})`)) fail(`version "${version}" does not name commit ${git}`, seen);

  const rss = second.process.find((r) => r[0] === "resident memory");
  if (!rss || !/[KMG]iB$/.test(rss[1])) fail("the process's resident memory is not shown", seen);
  const pid = second.process.find((r) => r[0] === "pid");
  if (!pid || !(Number(pid[1].replace(/,/g, "")) > 0)) fail("the process id is not shown", seen);

  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(JSON.stringify({
    frames_in: [first.framesIn, second.framesIn],
    frames_out: [first.framesOut, second.framesOut],
    rate_in: second.rateIn, rate_out: second.rateOut,
    connections: second.connections,
  }));
} finally {
  await browser.close();
}
