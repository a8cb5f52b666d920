#include <fstream>
#include <iostream>
#include <string>
int main(int argc, char **argv)
{
	std::string line;
	std::cout << "hello\n";
	for (int i = 1; i < argc; i++)
		std::cout << argv[i] << (i + 1 < argc ? " " : "\n");
	std::getline(std::cin, line);
	std::cout << line << "\n";
	std::ifstream in("in.txt");
	std::getline(in, line);
	std::cout << line << "\n";
	std::ofstream("artifacts/out.txt") << "made by c++\n";
	return 0;
}
