const fs = require("fs");
console.log("hello");
console.log(process.argv.slice(2).join(" "));
console.log(fs.readFileSync(0, "utf8").split("\n")[0]);
console.log(fs.readFileSync("in.txt", "utf8").trim());
fs.writeFileSync("artifacts/out.txt", "made by javascript\n");
