#include <stdio.h>
#include <string.h>
int main(int argc, char **argv)
{
	char line[64];
	puts("hello");
	for (int i = 1; i < argc; i++)
		printf("%s%s", argv[i], i + 1 < argc ? " " : "\n");
	if (fgets(line, sizeof(line), stdin))
		fputs(line, stdout);
	FILE *f = fopen("in.txt", "r"), *o = fopen("artifacts/out.txt", "w");
	if (!f || !o || !fgets(line, sizeof(line), f))
		return 1;
	fputs(line, stdout);
	fputs("made by c\n", o);
	return fclose(o) != 0;
}
